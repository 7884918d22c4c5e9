# Sourced by the SGLang engine checks (engine_accounting.sh, sglang_hicache.sh), from the
# repository root: the cached venv build/engine-venv with vLLM 0.33.0 (as vllm_offload.sh makes
# it), plus SGLang 0.5.23 WITHOUT its dependencies (its pins would replace vLLM's torch,
# transformers, xgrammar) and only the pure-Python packages that importing sglang.srt.mem_cache /
# sglang.srt.managers.schedule_batch needs: IPython (sglang/utils.py imports IPython.display at
# package import) with its own dependencies, and gguf (reached through server_args). Pinned,
# --no-deps. Sets $venv.
vllm_version=0.33.0
sglang_version=0.5.23
venv=build/engine-venv
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import vllm, sys; sys.exit(vllm.__version__ != '$vllm_version')" 2>/dev/null; then
  echo "installing vLLM $vllm_version into $venv (large: torch and its CUDA libraries)"
  python3 -m venv "$venv"
  "${pip[@]}" "vllm==$vllm_version"
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '$sglang_version')" 2>/dev/null; then
  echo "installing SGLang $sglang_version into $venv (no dependencies)"
  "${pip[@]}" --no-deps "sglang==$sglang_version"
fi
"${pip[@]}" --no-deps \
  ipython==9.18.1 ipython_pygments_lexers==1.1.1 decorator jedi==0.20.1 parso==0.8.7 \
  matplotlib-inline==0.2.2 pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 \
  wcwidth==0.9.4 stack_data==0.6.3 asttokens==3.0.2 executing==2.3.0 pure_eval==0.2.4 \
  traitlets==5.16.1 pygments gguf==0.19.0
mkdir -p build/engine-check

# Sourced by the vLLM engine checks (vllm_offload.sh, vllm_offload_connector.sh), from the
# repository root: the cached venv build/engine-venv with vLLM 0.33.0 and its dependencies from
# PyPI (about 9.4 GB with torch and its CUDA libraries; 3 minutes the first time, nothing
# afterwards), with the kvtk wheel of scripts/python (built first when missing) installed into
# it. Sets $venv.
vllm_version=0.33.0
venv=build/engine-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import vllm, sys; sys.exit(vllm.__version__ != '$vllm_version')" 2>/dev/null; then
  echo "installing vLLM $vllm_version into $venv (large: torch and its CUDA libraries)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "vllm==$vllm_version"
fi
if ! ls build/wheels/kvtk-*.whl >/dev/null 2>&1; then
  scripts/python
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall build/wheels/kvtk-*.whl
mkdir -p build/engine-check

# tests/sweep_help.py — prints the argparse help of kvtk sweep or kvtk report (the __main__.py given
# as the argument) without importing the kvtk package: the text sim/cli/sweep_help.hpp holds.
import importlib.util, os, sys
os.environ["COLUMNS"] = "80"
spec = importlib.util.spec_from_file_location("sweep_main", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
sys.stdout.write(m.parser().format_help().replace("optional arguments:", "options:"))

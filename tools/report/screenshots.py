"""Screenshots of each section of a kvtk report page, for docs/figures (the README shows them).

    build/nbvenv/bin/python tools/report/screenshots.py report.html docs/figures

Writes report_<section>.png: the page with every other section hidden, rendered by headless
Chromium with no network at 1,100 px, trimmed of the empty space below, as a palette PNG.
Needs chromium (scripts/install-deps --test) and Pillow (matplotlib's dependency, in the venv).
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from PIL import Image, ImageChops

SECTIONS = ("glance", "capacity", "tiers", "money", "todo")


def shoot(page: str, section: str, out: pathlib.Path, work: pathlib.Path) -> None:
    hide = f"<style>main > *:not(h1):not(#{section}) {{ display: none; }}</style></head>"
    copy = work / f"{section}.html"
    copy.write_text(page.replace("</head>", hide, 1))
    png = work / f"{section}.png"
    subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", f"--user-data-dir={work / 'profile'}",
                    "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                    "--hide-scrollbars", "--window-size=1100,6000", f"--screenshot={png}",
                    copy.as_uri()], check=True, capture_output=True, timeout=120,
                   env=dict(os.environ, HOME=str(work)))
    im = Image.open(png).convert("RGB")
    box = ImageChops.difference(im, Image.new("RGB", im.size, "white")).getbbox()
    im = im.crop((0, 0, im.width, min(im.height, box[3] + 16)))
    im.quantize(colors=64).save(out, optimize=True)


def main() -> int:
    page = pathlib.Path(sys.argv[1]).read_text()
    dest = pathlib.Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as work:
        for s in SECTIONS:
            out = dest / f"report_{s}.png"
            shoot(page, s, out, pathlib.Path(work))
            print(out, out.stat().st_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())

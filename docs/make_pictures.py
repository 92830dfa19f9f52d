"""The pictures of the docs, made by gradcli's own commands as a reader would run them.

    python docs/make_pictures.py             # rewrite docs/images/ and its manifest
    python docs/make_pictures.py --out DIR   # write them somewhere else (tests/test_doc_pictures.py)

Each picture is one ``gradcli plot`` or ``gradcli steps`` command with ``--save``. Next to the PNGs,
``manifest.json`` records each picture's command and size in pixels: what can be compared across
machines. The pixels themselves cannot: the lines of ``steps`` follow the last bits of the machine's
libm, and text follows its FreeType.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
from pathlib import Path

IMAGES = Path(__file__).resolve().parent / "images"
MANIFEST = "manifest.json"

#: file name -> the gradcli arguments that draw it (``--save FILE`` is added)
PICTURES = {
    # the classic V: truncation error falls as h (forward) or h**2 (central), round-off grows as 1/h
    "steps-exp.png": ["steps", "exp(x)", "--at", "x=1"],
    # two kinks: f is continuous there, its derivative jumps and is marked
    "plot-kinks.png": ["plot", "abs(x**2 - 1)", "--x", "-2:2"],
}


def command(name: str) -> str:
    """The command line a reader types for picture ``name``."""
    return shlex.join(["gradcli", *PICTURES[name], "--save", name])


def png_size(path: Path) -> list:
    """[width, height] from the PNG header (the IHDR chunk comes first)."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG file")
    return list(struct.unpack(">II", head[16:24]))


def make(out: Path) -> dict:
    """Draw every picture into ``out`` and write its manifest there; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    # Agg: the same raster backend on every machine, and no display needed
    env = {**os.environ, "MPLBACKEND": "Agg"}
    pictures = []
    for name, args in PICTURES.items():
        subprocess.run([sys.executable, "-m", "gradcli", *args, "--save", str(out / name)], env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pictures.append({"file": name, "command": command(name), "size": png_size(out / name)})
    manifest = {"made_by": "python docs/make_pictures.py", "pictures": pictures}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=IMAGES, help="the folder to write (default docs/images)")
    out = parser.parse_args(argv).out
    for picture in make(out)["pictures"]:
        print(f"{out / picture['file']}: {picture['command']}")


if __name__ == "__main__":
    main()

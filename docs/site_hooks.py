"""An MkDocs hook: the JSON Schemas live in the package (gradcli/schemas/, installed with it, one copy);
the site serves them at schemas/, where the pages link to them."""
from pathlib import Path

from mkdocs.structure.files import File

SCHEMAS = Path(__file__).resolve().parent.parent / "gradcli" / "schemas"


def on_files(files, config):
    for path in sorted(SCHEMAS.glob("*.json")):
        files.append(File.generated(config, f"schemas/{path.name}", abs_src_path=str(path)))
    return files

"""Familiars' markdown workspace (familiars §5.2.4, §5.3.1): a lossless export and import of the
SQLite truth as one markdown file per (scope, category) cell, entries as an HTML-comment JSON
header and a body. Formats in :mod:`.entry`, paths in :mod:`.paths`, export/import in :mod:`.sync`.
"""

from .entry import HEADER_KEYS, SPEC_KEYS, format_entry, header
from .paths import Location, parse_path, resolve_path, segment, unsegment
from .sync import ExportResult, ImportResult, export_workspace, import_workspace

__all__ = ["ExportResult", "HEADER_KEYS", "ImportResult", "Location", "SPEC_KEYS",
           "export_workspace", "format_entry", "header", "import_workspace", "parse_path",
           "resolve_path", "segment", "unsegment"]

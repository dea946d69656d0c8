"""Datasets: JSONL, JSON, CSV, Parquet files, the Hugging Face Hub and in-memory rows, as Records."""

from evalsi.datasets.formats import (
    EXTENSIONS,
    FORMATS,
    HF_PREFIX,
    detect_format,
    location,
    parse_hf_source,
    read_hf_rows,
    read_rows,
    to_plain,
)
from evalsi.datasets.loader import (
    Dataset,
    RecordStream,
    dataset_version,
    load_dataset,
    records_from_rows,
    stream_dataset,
    stream_rows,
)
from evalsi.datasets.mapping import (
    RECORD_TARGETS,
    USAGE_FIELDS,
    FieldMapping,
    MappingItem,
    parse_mapping,
    resolve_path,
)

# loading
__all__ = [
    "Dataset",
    "RecordStream",
    "dataset_version",
    "load_dataset",
    "records_from_rows",
    "stream_dataset",
    "stream_rows",
]
# field mapping
__all__ += [
    "RECORD_TARGETS",
    "USAGE_FIELDS",
    "FieldMapping",
    "MappingItem",
    "parse_mapping",
    "resolve_path",
]
# file formats
__all__ += [
    "EXTENSIONS",
    "FORMATS",
    "HF_PREFIX",
    "detect_format",
    "location",
    "parse_hf_source",
    "read_hf_rows",
    "read_rows",
    "to_plain",
]

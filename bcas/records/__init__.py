"""Records: the schema of an evaluated answer, the run's store, and price sheets.

``bcas.records.schema`` (Record, identity key), ``bcas.records.build`` (the one record
builder: answer + identity + grades), ``bcas.records.store`` (ResultStore,
reading, de-duplication, DataFrame export) and ``bcas.records.pricing`` (price sheets,
repricing).  ``bcas`` is the command line over them.
"""

from bcas.records.build import Answer, AnswerIdentity, Grades, build_record
from bcas.records.pricing import (
    DEFAULT_PRICES,
    ModelPrice,
    PriceError,
    PriceSheet,
    load_price_sheet,
    missing_price_note,
    parse_price_sheets,
    price_source,
    reprice,
    reprice_record,
)
from bcas.records.schema import LEGACY_PREFIX, RECORD_SCHEMA_VERSION, Key, Record, RecordError
from bcas.records.store import (
    LOCK_FILE,
    RECORDS_FILE,
    ResultStore,
    dedupe,
    load_records,
    read_records_file,
    record_files,
    to_dataframe,
)

__all__ = [
    "Answer",
    "AnswerIdentity",
    "Grades",
    "DEFAULT_PRICES",
    "LEGACY_PREFIX",
    "LOCK_FILE",
    "RECORDS_FILE",
    "RECORD_SCHEMA_VERSION",
    "Key",
    "ModelPrice",
    "PriceError",
    "PriceSheet",
    "Record",
    "RecordError",
    "ResultStore",
    "build_record",
    "dedupe",
    "load_price_sheet",
    "load_records",
    "missing_price_note",
    "parse_price_sheets",
    "price_source",
    "read_records_file",
    "record_files",
    "reprice",
    "reprice_record",
    "to_dataframe",
]

#!/usr/bin/env python3
"""Writes the "text" column of parquet files (FineWeb-Edu), in file and row order, as a
document stream on standard output, for `./tokenizer shard`:

    python3 data/parquet_docs.py FILE.parquet...

Document stream: per document, its length in bytes (decimal), a newline, then the UTF-8 bytes.
Needs pyarrow; without it this prints one error line and exits with status 1.
"""
import os
import sys


def write_document(out, text):
    """Appends one document to the stream."""
    data = text.encode("utf-8")
    out.write(b"%d\n" % len(data))
    out.write(data)


def main():
    """Streams every row of every file, reading a few thousand rows at a time."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        sys.exit("error: reading parquet files needs python3 with pyarrow (python3 -m pip install pyarrow)")
    if len(sys.argv) < 2:
        sys.exit("error: usage: python3 data/parquet_docs.py FILE.parquet...")
    out = sys.stdout.buffer
    try:
        for path in sys.argv[1:]:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=["text"]):
                for text in batch.column(0).to_pylist():
                    write_document(out, text)
        out.flush()
    except BrokenPipeError:
        # the reader stopped and has said why; keep Python from reporting the pipe at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()

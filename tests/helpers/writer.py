"""A writer process for concurrency and crash tests: appends events and prints each acknowledged id.

usage: python tests/helpers/writer.py TAG COUNT [BATCH]
An id is printed (and flushed) only after `Memory.ingest` returned `appended`, i.e. after fsync.
"""

import sys

from urchin.facade import Memory

tag, count = sys.argv[1], int(sys.argv[2])
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 1
memory = Memory.open()
out = sys.stdout
for start in range(0, count, batch):
    items = [{"id": f"{tag}-{i}", "content": f"event {i} from writer {tag} " + "x" * (i % 50), "source": "test"}
             for i in range(start, min(count, start + batch))]
    for result in memory.ingest(items):
        if result.status != "appended":
            raise SystemExit(f"unexpected {result.label} for {result.id}")
        out.write(result.id + "\n")
    out.flush()

"""The records that cross the steps, typed: what the state machine carries and what the tasks read.

- ``run``: ``RunRecord``, the run record decoded (Init's fields, and typed sub-records for what
  steering, budgets, outputs and MCP add); the tasks read it through ``load_run``.
- ``call``: ``CallItem``, the tool-call Map's item, with typed sub-records for the answers the
  state machine writes into it (decision, resolution, signal, check, child outcome).
- ``cursor``: ``Cursor``, the pointer into the checkpoint log that travels between turns, and
  ``Route``, where the Route choice sends a run.
- ``steps``: each task's output (a task is ``(runtime, In) -> Out``: ``In`` one of the records
  above, ``Out`` a ``TypedDict`` of what the next state reads).
- ``ids``: the run id, the turn and the call, with their bounds.
- ``migrations``: the checkpoint records' schema versions and the migrators that upgrade old
  records on read (the stores apply them; ``RunRecord`` reads the upgraded item).

Stored and travelling formats are unchanged: each record is parsed from, and (the run record)
handed back as, the same JSON the previous runtime wrote.
"""

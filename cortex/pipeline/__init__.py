"""The stages of ``cortex run``, each a pure function (record + context in, record or
``Rejection`` out), folded into a ``Plan`` by ``plan.make_plan``. No I/O, no clock."""

"""Files that outlive a run and how they are read and written: stored baselines (``baselines``,
``layout``, ``prune``, ``check``), the compile-time tier's budgets (``budgets``), margins files
(``margins``), saved reports (``reports``), schema versions and migration (``schema_versions``,
``migrate``, ``schemas/``), and the primitives they share: atomic writes, locks, strict JSON and
private folders (``files``, ``locks``, ``jsonio``, ``private_dir``)."""

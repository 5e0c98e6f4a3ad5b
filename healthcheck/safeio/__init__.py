"""Safe I/O on files and processes: the one writer (``atomic``: O_EXCL temporaries, fsync,
replace), the trusted-file rules for root (``trust``), the one subprocess seam (``subproc``: fixed PATH,
no shell, deadlines, process-group kill) and the hooks' parsed-config cache (``tomlcache``)."""

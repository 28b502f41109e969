#!/bin/bash
# `loadtest --engine` wrapper: runs $MH_REAL with MALLOC_ARENA_MAX=$MH_ARENAS when that is set
# (glibc's arena cap from the environment, for the engine alone, not the harness).
[ -n "$MH_ARENAS" ] && export MALLOC_ARENA_MAX=$MH_ARENAS
real=$MH_REAL
unset MH_REAL MH_ARENAS
exec "$real" "$@"

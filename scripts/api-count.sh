#!/usr/bin/env bash
# Counts the exported API of the public packages of every module (import paths
# without an "internal" element; commands excluded), per package: functions,
# methods of exported types, types, variables and constants ("API", the
# figure issue 13 asks to cut by a third), and separately the exported struct
# fields and interface methods ("fields"). Test files are not read. Run it
# before and after a change to an API to measure what the change did.
# Arguments are package patterns (default ./... ./cluster/... ./grpclimit/...,
# the modules with public packages); with -undocumented first,
# it lists the exported names that have no doc comment instead, and fails
# if there is one.
# The counting is internal/tools/apicount (go/ast over the files `go list`
# selects for this platform).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./internal/tools/apicount "$@"

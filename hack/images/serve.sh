#!/bin/sh
# PID 1 of the test image: serves /www over HTTP on $PORT and exits at once on SIGTERM, so that a
# container restart (in-place update, recreate request) takes no grace period.
port="${PORT:-8080}"
echo "testapp $(cat /VERSION) listening on :$port"
httpd -f -p "$port" -h /www &
child=$!
trap 'kill "$child" 2>/dev/null; exit 0' TERM INT
wait "$child"

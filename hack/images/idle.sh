#!/bin/sh
# PID 1 of the sidecar test image: idles and exits at once on SIGTERM.
echo "sidecar $(cat /VERSION) started"
trap 'exit 0' TERM INT
while :; do
  sleep 3600 &
  wait $!
done

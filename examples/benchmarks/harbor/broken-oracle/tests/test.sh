#!/bin/bash
if [ "$(cat /app/reversed.txt 2>/dev/null)" = "$(printf 'three\ntwo\none')" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "reversed.txt: $(head -c 80 /app/reversed.txt 2>/dev/null)"
  echo 0 > /logs/verifier/reward.txt
fi

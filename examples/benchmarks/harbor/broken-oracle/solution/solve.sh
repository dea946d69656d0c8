#!/bin/bash
# deliberately wrong: copies the file instead of reversing it, so the oracle run catches a broken task
cp /app/words.txt /app/reversed.txt

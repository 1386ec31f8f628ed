#!/usr/bin/env bash
# Apache Kafka for the metrics-cache tests: the broker's jars from Maven
# Central (org.apache.kafka:kafka_2.13 and a logging binding, which the jars
# do not carry), cached in ~/.cache/berth/kafka-<version>/libs. The tests run
# a single-node KRaft broker with `java -cp 'libs/*' kafka.Kafka`.
# Prints the directory holding libs/ on its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(sed -n 's:.*<artifactId>kafka_2.13</artifactId><version>\([^<]*\)</version>.*:\1:p' "$here/kafka/pom.xml")"
CACHE="${BERTH_CACHE:-$HOME/.cache/berth}"
DEST="$CACHE/kafka-$version"
source "$(dirname "${BASH_SOURCE[0]}")/cache-lock.sh"
cache_lock "kafka-$version"
if [ -f "$DEST/libs/.complete" ]; then
  echo "kafka $version: cached in $DEST" >&2
  echo "$DEST"
  exit 0
fi
command -v java >/dev/null || { echo "kafka: java is needed (apt-get install default-jre-headless)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "kafka: maven is needed (apt-get install maven)" >&2; exit 1; }
echo "kafka $version: fetching the broker's jars from Maven Central (first time only)" >&2
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
  -DoutputDirectory="$DEST.tmp/libs" >&2
touch "$DEST.tmp/libs/.complete"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
echo "kafka $version: $(ls "$DEST/libs" | wc -l) jars in $DEST/libs" >&2
echo "$DEST"

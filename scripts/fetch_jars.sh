#!/usr/bin/env bash
# Resolves the JVM libraries Headwater needs beyond PySpark's own jars, from Maven Central:
#   .jars/spark/  Delta Lake + Spark's Kafka connector (added to every Spark session Headwater builds)
#   .jars/kafka/  an Apache Kafka broker (tests start it in KRaft mode)
#   .jars/debezium-sqlserver/  Debezium's SQL Server connector 3.6.1 + mssql-jdbc 12.4.2 (the SQL
#                 Server emulator's JVM tests: Microsoft's JDBC driver and Debezium run against it)
# Jars PySpark already ships (any version) are left out of .jars/spark, so the session's classpath
# has one copy of each library. Idempotent: does nothing while the poms are older than the stamp.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MAVEN_DIR=scripts/maven
OUT=.jars
STAMP="$OUT/.fetched"
say() { printf 'fetch_jars: %s\n' "$*"; }

if [ -f "$STAMP" ] && [ -z "$(find "$MAVEN_DIR" -newer "$STAMP" -name '*.xml')" ]; then
  exit 0
fi
pyspark_jars=$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
[ -d "$pyspark_jars" ] || { echo "fetch_jars: ERROR: pyspark's jars not found at $pyspark_jars" >&2; exit 1; }

resolve() {  # resolve POM DEST
  local tmp
  tmp=$(mktemp -d)
  say "resolving $1 from Maven Central"
  mvn -q -B -s "$MAVEN_DIR/settings.xml" -f "$MAVEN_DIR/$1" dependency:copy-dependencies \
    -DoutputDirectory="$tmp" -DincludeScope=runtime >"$tmp.log" 2>&1 \
    || { cat "$tmp.log" >&2; echo "fetch_jars: ERROR: maven could not resolve $1 (log above)" >&2; exit 1; }
  rm -rf "$2" && mkdir -p "$2" && mv "$tmp"/*.jar "$2"/ && rm -rf "$tmp" "$tmp.log"
}

resolve kafka-broker.pom.xml "$OUT/kafka"
resolve spark-jars.pom.xml "$OUT/spark"
resolve debezium-sqlserver.pom.xml "$OUT/debezium-sqlserver"
# drop what PySpark already has; commons-logging clashes with PySpark's jcl-over-slf4j, and the
# RoaringBitmap 0.9 shims are not needed by PySpark's RoaringBitmap 1.x
for jar in "$OUT"/spark/*.jar; do
  artifact=$(basename "$jar" | sed -E 's/-[0-9][^-]*(-[0-9]+)?\.jar$//')
  if compgen -G "$pyspark_jars/${artifact}-[0-9]*.jar" >/dev/null || [[ "$artifact" =~ ^(commons-logging|shims)$ ]]; then
    rm "$jar"
  fi
done
touch "$STAMP"
say "$(ls "$OUT"/spark | wc -l) jars for Spark, $(ls "$OUT"/kafka | wc -l) for the Kafka broker, $(ls "$OUT"/debezium-sqlserver | wc -l) for Debezium's SQL Server connector"

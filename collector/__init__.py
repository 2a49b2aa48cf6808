"""OTLP receivers (gRPC, HTTP), validation, redaction and publishing to Kafka."""

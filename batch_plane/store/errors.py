"""What the store's clients raise: defined apart from the clients, so that code which only
catches them (a command talking to a running stack's endpoint) does not load the engine."""


class QueryError(RuntimeError):
    """The query failed; the message is ClickHouse's or the transport's."""


class StatementRefused(QueryError):
    """A statement asked to run read-only is not a read (`reads.refusal`)."""


class RowsRejected(QueryError):
    """An insert's rows could not be encoded for their columns (a value outside its column
    type's range): inserting the same rows again cannot succeed."""


MEMORY_LIMIT_ERROR = "MEMORY_LIMIT_EXCEEDED"
"""ClickHouse's name for a statement that would take it past a memory limit (the server's,
`max_server_memory_usage`, or the query's own)."""


def over_memory_limit(exc: Exception) -> bool:
    """Whether `exc` is ClickHouse refusing a statement for its memory limit: the same
    work in smaller statements may pass."""
    return MEMORY_LIMIT_ERROR in str(exc)


class StoreUnavailable(RuntimeError):
    """ClickHouse could not be reached or opened."""

"""What the store's clients raise: defined apart from the clients, so that code which only
catches them (a command talking to a running stack's endpoint) does not load the engine."""


class QueryError(RuntimeError):
    """The query failed; the message is ClickHouse's or the transport's."""


class StatementRefused(QueryError):
    """A statement asked to run read-only is not a read (`reads.refusal`)."""


class RowsRejected(QueryError):
    """An insert's rows could not be encoded for their columns (a value outside its column
    type's range): inserting the same rows again cannot succeed."""


class StoreUnavailable(RuntimeError):
    """ClickHouse could not be reached or opened."""

"""ontime: the Python client of ontime's HTTP API v1 (standard library only).

    from ontime import Client
    c = Client("http://127.0.0.1:7070", token="...")
    task = c.submit(topic="order.cancel", key="order-42", delay="30m",
                    target="https://shop.example/hooks/cancel", payload={"order": 42})
"""
from ._client import MAX_BATCH, BatchResult, Client, Coalesce
from ._errors import (
    APIError,
    ConflictError,
    ForbiddenError,
    InternalError,
    InvalidError,
    NetworkError,
    NotFoundError,
    OntimeError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
)
from ._signature import verify_signature
from ._types import (
    BatchItem,
    BatchRef,
    BatchTask,
    ClusterView,
    ErrorDetail,
    Job,
    JobRun,
    ListPage,
    Outbox,
    Schedule,
    ScheduleRequest,
    ScheduleTask,
    Status,
    Task,
    TaskPatch,
    TaskRequest,
    Topic,
    TopicList,
)

__all__ = [
    "MAX_BATCH",
    "APIError",
    "BatchItem",
    "BatchRef",
    "BatchResult",
    "BatchTask",
    "Client",
    "ClusterView",
    "Coalesce",
    "ConflictError",
    "ErrorDetail",
    "ForbiddenError",
    "InternalError",
    "InvalidError",
    "Job",
    "JobRun",
    "ListPage",
    "NetworkError",
    "NotFoundError",
    "OntimeError",
    "Outbox",
    "Schedule",
    "ScheduleRequest",
    "ScheduleTask",
    "Status",
    "Task",
    "TaskPatch",
    "TaskRequest",
    "TooLargeError",
    "Topic",
    "TopicList",
    "UnauthorizedError",
    "UnavailableError",
    "verify_signature",
]

"""The two kinds of record, DDIs and phone users: what differs between them (model, fields,
keys, who may create), so every rule over records is written once for both (crud.py,
record_query.py, listing.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from ...models import Ddi, PhoneUser, RecordModel
from ..fields import Part
from ..history.audit import AuditData

EDITABLE = ("virt_exten", "company")
# An update's values, the same for both kinds: what each calls not editable differs only in
# the message (Kind.update_part).
CHANGES = Part(
    EDITABLE,
    at_least_one=True,
    name="RecordChanges",
    doc="An update's new values: at least one of these. A record's key (a DDI's dialcode and "
    "number, a phone user's username) is not editable.",
)


@dataclass(frozen=True)
class Kind:
    name: str  # the request's `type`, and the history/audit kind
    label: str  # for messages: "DDI", "phone user"
    schema: str  # what the OpenAPI document names its models after: "Ddi", "PhoneUser"
    model: RecordModel
    fields: tuple[str, ...]  # in answer order
    order: tuple[str, ...]  # read order
    keys: tuple[str, ...]  # fields fixed at creation
    history_key: Callable[[Any], str]
    company_admin_creates: bool  # may a Company-Admin create and delete these?
    global_key: bool  # unique across companies (DDIs) or only within one (phone users)
    conflict_message: str
    # A new row's stored columns from its fields: the fields and what is derived from them
    # once at creation (a DDI's reversed number, for the number search).
    stored: Callable[[dict[str, str]], dict[str, str]] = dict
    # Whether its records are numbers of the provider's inventory (services/inventory.py):
    # creating one takes the number into service, deleting one gives it back.
    numbered: bool = False
    # What a create, update and link may also give that is kept on the number's inventory
    # row, not the record's (a DDI's description): optional, and never in a read's answer.
    number_fields: tuple[str, ...] = ()

    def number_key(self, row: Any) -> tuple[str, str]:
        """A numbered record's inventory key, (dialcode, number)."""
        return (row.dialcode, row.number)

    def as_dict(self, row: Any) -> dict[str, str]:
        return {f: getattr(row, f) for f in self.fields}

    def member(self, row: Any) -> tuple[str, str]:
        return (row.company, self.history_key(row))

    def key_label(self, row: Any) -> str:
        """How messages name the record: '44:2071234567', 'acme/ana.kim'."""
        key = self.history_key(row)
        return key if self.global_key else f"{row.company}/{key}"

    def target(self, row: Any) -> str:
        """How the audit log names the record: 'ddi 44:2071234567', 'user acme/ana.kim'."""
        return f"{self.name} {self.key_label(row)}"

    def change(
        self,
        action: str,
        before: dict[str, Any] | None = None,
        after: dict[str, Any] | None = None,
        detail: str | None = None,
    ) -> AuditData:
        """One record's create, update, link or delete as the change path records it: its audit
        entry and change event name the record by its key, in the company it is in after the
        change (before it, for a delete); a move also names the company it left. Every writer
        of records (single and batch writes, bulk actions, the import) makes its entries here.
        """
        now = after if after is not None else before
        assert now is not None, "a change has a before, an after, or both"
        left = before["company"] if before is not None and after is not None else None
        return AuditData(
            f"{self.name}.{action}",
            self.target(Row(now)),
            company=now["company"],
            before=before,
            after=after,
            detail=detail,
            other_company=left if left != now["company"] else None,
        )

    # The request objects (services/fields.py), each a model the document names.
    @cached_property
    def create_part(self) -> Part:
        doc = f"One of the {self.label}s, every field given."
        if self.number_fields:
            doc = f"One of the {self.label}s: every field given but the {_or(self.number_fields)}."
        allowed = self.fields + self.number_fields
        return Part(allowed, self.fields, name=self.schema, doc=doc)

    @cached_property
    def answer_part(self) -> Part:
        """A record as a read answers it: its fields, every one, and nothing of its number's
        (so a DDI's is the create's without the description)."""
        if not self.number_fields:
            return self.create_part
        doc = f"One of the {self.label}s as a read answers it: exactly these fields."
        return Part(self.fields, self.fields, name=f"{self.schema}Record", doc=doc)

    @cached_property
    def changes_part(self) -> Part:
        """An update's values (CHANGES), and the number's fields for a numbered kind."""
        if not self.number_fields:
            return CHANGES
        doc = (
            f"An update's new values: at least one of these. A {self.label}'s key (its "
            "dialcode and number) is not editable; a description alone changes no history."
        )
        allowed = EDITABLE + self.number_fields
        return Part(allowed, at_least_one=True, name=f"{self.schema}Changes", doc=doc)

    @cached_property
    def scope_part(self) -> Part:
        doc = (
            f"Which {self.label}s a read returns: each field given is an exact-match filter; "
            "none, every visible one."
        )
        return Part(self.fields, name=f"{self.schema}Filter", doc=doc)

    @cached_property
    def scoped_write_part(self) -> Part:
        doc = (
            f"Which {self.label}s an update or delete touches: `company` required, every other "
            "field narrows."
        )
        return Part(self.fields, ("company",), name=f"{self.schema}Scope", doc=doc)

    @cached_property
    def update_part(self) -> Part:
        return replace(self.changes_part, not_editable=self.keys)

    @cached_property
    def key_part(self) -> Part:
        """The order fields, all required: one record (a DDI's dialcode and number)."""
        doc = f"One of the {self.label}s by its key."
        return Part(self.order, self.order, name=f"{self.schema}Key", doc=doc)


def _or(names: tuple[str, ...]) -> str:
    return " or ".join(f"`{n}`" for n in names)


class Row:
    """Attribute access over a plain dict, so Kind helpers work before a row is stored."""

    def __init__(self, data: dict[str, Any]):
        self.__dict__.update(data)


def stored_ddi(values: dict[str, str]) -> dict[str, str]:
    """A new DDI's stored columns: its fields (not its number's, such as the description) and
    its number's digits reversed, which the number search seeks by the end of the number
    (record_query, q)."""
    row = {f: values[f] for f in ("dialcode", "number", "virt_exten", "company")}
    return {**row, "number_reversed": values["number"][::-1]}


DDI = Kind(
    name="ddi",
    label="DDI",
    schema="Ddi",
    model=Ddi,
    fields=("dialcode", "number", "virt_exten", "company"),
    order=("dialcode", "number"),
    keys=("dialcode", "number"),
    history_key=lambda row: f"{row.dialcode}:{row.number}",
    global_key=True,
    company_admin_creates=False,
    conflict_message="A DDI with this dialcode and number already exists.",
    stored=stored_ddi,
    numbered=True,
    number_fields=("description",),
)

PHONE_USER = Kind(
    name="user",
    label="phone user",
    schema="PhoneUser",
    model=PhoneUser,
    fields=("username", "virt_exten", "company"),
    order=("company", "username"),
    keys=("username",),
    history_key=lambda row: row.username,
    global_key=False,
    company_admin_creates=True,
    conflict_message="A phone user with this username already exists in that company.",
)

# By the `type` a request names.
KINDS = {kind.name: kind for kind in (DDI, PHONE_USER)}

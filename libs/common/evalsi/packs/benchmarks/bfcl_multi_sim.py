"""BFCL's multi-turn API simulators, native: ``MessageAPI`` and ``TicketAPI`` here, ``TradingBot`` in
``bfcl_multi_trading``, ``VehicleControlAPI`` in ``bfcl_multi_vehicle``, ``TwitterAPI`` in ``bfcl_multi_twitter``,
``TravelAPI`` in ``bfcl_multi_travel``, ``GorillaFileSystem`` in ``bfcl_multi_files``, ``MathAPI`` in
``bfcl_multi_math`` (bfcl-eval 2026.3.23's ``multi_turn_eval/func_source_code/message_api.py``, ``ticket_api.py``,
``trading_bot.py``, ``vehicle_control.py``, ``posting_api.py``, ``travel_booking.py``, ``gorilla_file_system.py``
and ``math_api.py``, method for method, with their long-context variants).

BFCL's checker compares two runs of a simulator by their public attributes and their calls' results as text, so
these classes keep BFCL's attribute names, method names and signatures (a call with a wrong argument fails with the
same ``TypeError`` text), return values and error texts, and its seeded message ids. The other classes BFCL
simulates (:data:`NOT_BUILT`, none now), and the long-context variants in :data:`NO_LONG_CONTEXT`, are not
built: :func:`new_simulator` refuses them by name. The memory category's kv and rec_sum backends are in
``bfcl_memory``, its vector backend in ``bfcl_memory_vector``.
tests/benchmarks_import/test_bfcl_multi_reference.py, test_bfcl_multi_twitter_travel.py and
test_bfcl_multi_files_math.py hold these to bfcl-eval's classes on the same call sequences.
"""

from __future__ import annotations

import random
from copy import deepcopy
from typing import Any

from evalsi.packs.benchmarks.bfcl_memory import MEMORY_CLASSES
from evalsi.packs.benchmarks.bfcl_memory_vector import MemoryAPI_vector
from evalsi.packs.benchmarks.bfcl_multi_files import GorillaFileSystem
from evalsi.packs.benchmarks.bfcl_multi_math import MathAPI
from evalsi.packs.benchmarks.bfcl_multi_trading import TradingBot
from evalsi.packs.benchmarks.bfcl_multi_travel import TravelAPI
from evalsi.packs.benchmarks.bfcl_multi_twitter import TwitterAPI
from evalsi.packs.benchmarks.bfcl_multi_vehicle import VehicleControlAPI

_MESSAGE_DEFAULTS: dict[str, Any] = {
    "generated_ids": set(),
    "user_count": 4,
    "user_map": {"Alice": "USR001", "Bob": "USR002", "Catherine": "USR003", "Daniel": "USR004"},
    "inbox": [{"USR002": "My name is Alice. I want to connect."}, {"USR003": "Could you upload the file?"},
              {"USR004": "Could you upload the file?"}],
    "message_count": 3,
    "current_user": None,
}
_MESSAGE_SEED = 200191  # BFCL's default random_seed for message ids


class MessageAPI:
    """BFCL's workspace messaging simulator: users, a login, an inbox of ``{receiver_id: message}``."""

    def __init__(self) -> None:
        self.generated_ids: Any = set()
        self.user_count: Any = 0
        self.user_map: Any = {}
        self.inbox: Any = []
        self.message_count: Any = 0
        self.current_user: Any = None
        self._random = random.Random(_MESSAGE_SEED)

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        # As BFCL: a scenario's value replaces the default as given (a JSON list of generated_ids stays a list, and
        # sending a message then fails as it does there).
        defaults = deepcopy(_MESSAGE_DEFAULTS)
        self._random = random.Random(scenario.get("random_seed", _MESSAGE_SEED))
        for key in ("generated_ids", "user_count", "user_map", "inbox", "message_count", "current_user"):
            setattr(self, key, scenario.get(key, defaults[key]))

    def _generate_id(self) -> dict[str, int]:
        new_id = self._random.randint(10000, 99999)
        while new_id in self.generated_ids:
            new_id = self._random.randint(10000, 99999)
        self.generated_ids.add(new_id)
        return {"new_id": new_id}

    def list_users(self) -> dict[str, Any]:
        return {"user_list": list(self.user_map.keys())}

    def get_user_id(self, user: str) -> dict[str, Any]:
        if user not in self.user_map:
            return {"error": f"User '{user}' not found in the workspace."}
        return {"user_id": self.user_map.get(user)}

    def message_login(self, user_id: str) -> dict[str, Any]:
        if user_id not in list(self.user_map.values()):
            return {"login_status": False, "message": f"User ID '{user_id}' not found."}
        self.current_user = user_id
        return {"login_status": True, "message": f"User '{user_id}' logged in successfully."}

    def message_get_login_status(self) -> dict[str, bool]:
        return {"login_status": bool(self.current_user)}

    def send_message(self, receiver_id: str, message: str) -> dict[str, Any]:
        if not self.current_user:
            return {"error": "No user is currently logged in."}
        if receiver_id not in self.user_map.values():
            return {"error": f"Receiver ID '{receiver_id}' not found."}
        message_id = self._generate_id()
        self.inbox.append({receiver_id: message})
        self.message_count += 1
        return {"sent_status": True, "message_id": message_id,
                "message": f"Message sent to '{receiver_id}' successfully."}

    def delete_message(self, receiver_id: str) -> dict[str, Any]:
        if not self.current_user:
            return {"error": "No user is currently logged in."}
        for message in self.inbox[::-1]:  # the latest message to that receiver
            receiver, _ = list(message.items())[0]  # noqa: RUF015 - BFCL's IndexError on {}
            if receiver == receiver_id:
                self.inbox.remove(message)
                return {"deleted_status": True, "receiver_id": receiver,
                        "message": f"Receiver {receiver_id}'s latest message deleted successfully."}
        return {"error": f"Receiver ID {receiver_id} not found."}

    def view_messages_sent(self) -> dict[str, Any]:
        if not self.current_user:
            return {"error": "No user is currently logged in."}
        sent: dict[Any, list[Any]] = {}
        for message in self.inbox:
            receiver, content = list(message.items())[0]  # noqa: RUF015 - BFCL's IndexError on {}
            sent.setdefault(receiver, []).append(content)
        return {"messages": sent}

    def add_contact(self, user_name: str) -> dict[str, Any]:
        if user_name in self.user_map:
            return {"error": f"User name '{user_name}' already exists."}
        self.user_count += 1
        user_id = f"USR{str(self.user_count).zfill(3)}"
        if user_id in self.user_map.values():
            return {"error": f"User ID '{user_id}' already exists."}
        self.user_map[user_name] = user_id
        return {"added_status": True, "user_id": user_id, "message": f"Contact '{user_name}' added successfully."}

    def search_messages(self, keyword: str) -> dict[str, Any]:
        if not self.current_user:
            return {"error": "No user is currently logged in."}
        keyword_lower = keyword.lower()
        results = []
        for message in self.inbox:
            receiver_id, content = list(message.items())[0]  # noqa: RUF015 - BFCL's IndexError on {}
            if keyword_lower in content.lower():
                results.append({"receiver_id": receiver_id, "message": content})
        return {"results": results}

    def get_message_stats(self) -> dict[str, Any]:
        if not self.current_user:
            return {"error": "No user is currently logged in."}
        received_count = 0
        contacts = set()
        for message in self.inbox:
            receiver_id, _ = list(message.items())[0]  # noqa: RUF015 - BFCL's IndexError on {}
            received_count += 1
            contacts.add(receiver_id)
        return {"stats": {"received_count": received_count, "total_contacts": len(contacts)}}


_TICKET_DEFAULTS: dict[str, Any] = {"ticket_queue": [], "ticket_counter": 1, "current_user": None}
_TICKET_FIELDS = {"title", "description", "status", "priority"}


class TicketAPI:
    """BFCL's support-ticket simulator: a queue of tickets, a counter for their ids, a login."""

    def __init__(self) -> None:
        self.ticket_queue: Any = []
        self.ticket_counter: Any = 1
        self.current_user: Any = None

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        defaults = deepcopy(_TICKET_DEFAULTS)
        for key in ("ticket_queue", "ticket_counter", "current_user"):
            setattr(self, key, scenario.get(key, defaults[key]))

    def create_ticket(self, title: str, description: str = "", priority: int = 1) -> dict[str, Any]:
        if not self.current_user:
            return {"error": "User not authenticated. Please log in to create a ticket."}
        if priority < 1 or priority > 5:
            return {"error": "Invalid priority. Priority must be between 1 and 5."}
        ticket = {"id": self.ticket_counter, "title": title, "description": description, "status": "Open",
                  "priority": priority, "created_by": self.current_user}
        self.ticket_queue.append(ticket)
        self.ticket_counter += 1
        return ticket

    def get_ticket(self, ticket_id: int) -> dict[str, Any]:
        ticket = self._find_ticket(ticket_id)
        if not ticket:
            return {"error": f"Ticket with ID {ticket_id} not found."}
        return ticket

    def close_ticket(self, ticket_id: int) -> dict[str, Any]:
        ticket = self._find_ticket(ticket_id)
        if not ticket:
            return {"error": f"Ticket with ID {ticket_id} not found."}
        if ticket["status"] == "Closed":
            return {"error": f"Ticket with ID {ticket_id} is already closed."}
        ticket["status"] = "Closed"
        return {"status": f"Ticket {ticket_id} has been closed successfully."}

    def resolve_ticket(self, ticket_id: int, resolution: str) -> dict[str, Any]:
        ticket = self._find_ticket(ticket_id)
        if not ticket:
            return {"error": f"Ticket with ID {ticket_id} not found."}
        if ticket["status"] == "Resolved":
            return {"error": f"Ticket with ID {ticket_id} is already resolved."}
        ticket["status"] = "Resolved"
        ticket["resolution"] = resolution
        return {"status": f"Ticket {ticket_id} has been resolved successfully."}

    def edit_ticket(self, ticket_id: int, updates: dict[str, Any]) -> dict[str, Any]:
        ticket = self._find_ticket(ticket_id)
        if not ticket:
            return {"error": f"Ticket with ID {ticket_id} not found."}
        invalid_fields = set(updates.keys()) - _TICKET_FIELDS
        if invalid_fields:  # a set's order, as BFCL joins it
            return {"error": f"Invalid fields for update: {', '.join(invalid_fields)}"}
        for key, value in updates.items():
            if value is not None:
                ticket[key] = value
        return {"status": f"Ticket {ticket_id} has been updated successfully."}

    def _find_ticket(self, ticket_id: int) -> dict[str, Any] | None:
        for ticket in self.ticket_queue:
            if ticket["id"] == ticket_id:
                return ticket
        return None

    def ticket_login(self, username: str, password: str) -> dict[str, bool]:
        if username and password:
            self.current_user = username
            return {"success": True}
        return {"success": False}

    def ticket_get_login_status(self) -> dict[str, bool]:
        return {"login_status": bool(self.current_user)}

    def logout(self) -> dict[str, bool]:
        if self.current_user:
            self.current_user = None
            return {"success": True}
        return {"success": False}

    def get_user_tickets(self, status: str | None = None) -> list[dict[str, Any]]:
        if not self.current_user:
            return [{"error": "User not authenticated. Please log in to view tickets."}]
        tickets = [ticket for ticket in self.ticket_queue if ticket["created_by"] == self.current_user]
        if status:
            tickets = [ticket for ticket in tickets if ticket["status"].lower() == status.lower()]
        return tickets


# the memory category's three backends (last) take the memory's snapshot as their config (bfcl_memory,
# bfcl_memory_vector)
SIMULATORS: dict[str, type[Any]] = {
    "MessageAPI": MessageAPI, "TicketAPI": TicketAPI, "TradingBot": TradingBot, "VehicleControlAPI": VehicleControlAPI,
    "TwitterAPI": TwitterAPI, "TravelAPI": TravelAPI, "GorillaFileSystem": GorillaFileSystem, "MathAPI": MathAPI,
    **MEMORY_CLASSES, "MemoryAPI_vector": MemoryAPI_vector}
# classes with no state, into which BFCL loads no scenario
STATELESS = ("MathAPI",)
# BFCL's other multi-turn classes, refused by name
NOT_BUILT: tuple[str, ...] = ()
# classes whose long-context variant (answers padded with BFCL's long-context data) is not ported
NO_LONG_CONTEXT: tuple[str, ...] = ()


class NotBuiltError(ValueError):
    """A BFCL class with no native simulator here."""


def new_simulator(class_name: str, config: dict[str, Any], *, long_context: bool = False) -> Any:
    """A fresh simulator of ``class_name`` at ``config`` (its part of the question's ``initial_config``, copied)."""
    cls = SIMULATORS.get(class_name)
    if cls is None:
        known = " (one of BFCL's, not built here)" if class_name in NOT_BUILT else ""
        raise NotBuiltError(f"BFCL class {class_name!r}{known}: no simulator; built: {', '.join(SIMULATORS)}")
    if long_context and class_name in NO_LONG_CONTEXT:
        raise NotBuiltError(f"BFCL class {class_name!r} in a long_context question: its long-context data is not "
                            "ported")
    instance = cls()
    if class_name not in STATELESS:
        instance._load_scenario(deepcopy(config), long_context=long_context)
    return instance


def public_methods(instance: Any) -> list[str]:
    """The methods a model may call: every public one, in name order (as ``inspect.getmembers`` lists them)."""
    return sorted(name for name in dir(instance) if not name.startswith("_") and callable(getattr(instance, name)))


def public_state(instance: Any) -> dict[str, Any]:
    """The attributes BFCL's state checker compares: every public one."""
    return {name: value for name, value in vars(instance).items() if not name.startswith("_")}

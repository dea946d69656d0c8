"""BFCL's ``TravelAPI`` simulator, native (bfcl-eval 2026.3.23's ``func_source_code/travel_booking.py``, method for
method: attribute names, signatures, return values, error texts, and its seeded random ids: access tokens, card,
booking, transaction and insurance ids, drawn in BFCL's order from ``random.Random(random_seed)``).

Its ``long_context`` variant is BFCL's too: the padding credit cards and bookings of BFCL's ``long_context.py`` are
added to the scenario's (never over them), a booking answers with the whole booking history, and a flight's cost
list holds every route's cost. BFCL adds its module-level padding dicts themselves to every simulator, so a
booking paid with a padding card lowers that card's balance in the possible answer's simulator and in later
questions too; here each simulator has its own copy (``bfcl_multi_long_context.padding``).
"""

from __future__ import annotations

import random
from copy import deepcopy
from datetime import datetime
from typing import Any

from evalsi.packs.benchmarks.bfcl_multi_long_context import padding

_DEFAULTS: dict[str, Any] = {
    "random_seed": 141053, "credit_card_list": {}, "booking_record": {}, "access_token": None, "token_type": None,
    "token_expires_in": None, "token_scope": None, "user_first_name": None, "user_last_name": None,
    "budget_limit": None,
}
# (from, to, base cost in USD), in BFCL's order: a long-context cost list is in this order
_ROUTES = (
    ("SFO", "LAX", 200), ("SFO", "JFK", 500), ("SFO", "ORD", 400), ("SFO", "BOS", 450), ("SFO", "RMS", 300),
    ("SFO", "SBK", 350), ("SFO", "MPC", 370), ("SFO", "SVP", 320), ("SFO", "SHD", 330), ("SFO", "SSV", 340),
    ("SFO", "OKD", 360), ("SFO", "WLB", 310), ("SFO", "CRH", 380), ("SFO", "ATV", 390), ("SFO", "PHV", 420),
    ("SFO", "GFD", 430), ("SFO", "CIA", 700), ("LAX", "SFO", 100), ("LAX", "JFK", 600), ("LAX", "ORD", 500),
    ("LAX", "BOS", 550), ("LAX", "RMS", 310), ("LAX", "SBK", 320), ("LAX", "MPC", 330), ("LAX", "SVP", 340),
    ("LAX", "SHD", 350), ("LAX", "SSV", 360), ("LAX", "OKD", 370), ("LAX", "WLB", 380), ("LAX", "CRH", 390),
    ("LAX", "ATV", 400), ("LAX", "PHV", 410), ("LAX", "GFD", 420), ("LAX", "HND", 430), ("JFK", "ORD", 300),
    ("JFK", "BOS", 250), ("JFK", "RMS", 450), ("JFK", "SBK", 460), ("JFK", "MPC", 470), ("JFK", "SVP", 480),
    ("JFK", "SHD", 490), ("JFK", "SSV", 500), ("JFK", "OKD", 510), ("JFK", "WLB", 520), ("JFK", "CRH", 530),
    ("JFK", "ATV", 540), ("JFK", "PHV", 550), ("JFK", "GFD", 560), ("JFK", "LAX", 570), ("JFK", "HND", 800),
    ("JFK", "PVG", 950), ("JFK", "PEK", 1000), ("ORD", "LAX", 180), ("ORD", "BOS", 200), ("ORD", "RMS", 350),
    ("ORD", "SBK", 360), ("ORD", "MPC", 370), ("ORD", "SVP", 380), ("ORD", "SHD", 390), ("ORD", "SSV", 400),
    ("ORD", "OKD", 410), ("ORD", "WLB", 420), ("ORD", "CRH", 430), ("ORD", "ATV", 440), ("ORD", "PHV", 450),
    ("ORD", "GFD", 460), ("BOS", "RMS", 400), ("BOS", "SBK", 410), ("BOS", "MPC", 420), ("BOS", "SVP", 430),
    ("BOS", "SHD", 440), ("BOS", "SSV", 450), ("BOS", "OKD", 460), ("BOS", "WLB", 470), ("BOS", "CRH", 480),
    ("BOS", "ATV", 490), ("BOS", "PHV", 500), ("BOS", "GFD", 510), ("RMS", "BOS", 200), ("RMS", "JFK", 210),
    ("RMS", "SBK", 220), ("RMS", "MPC", 230), ("RMS", "SVP", 240), ("RMS", "SHD", 250), ("RMS", "SSV", 260),
    ("RMS", "OKD", 270), ("RMS", "WLB", 280), ("RMS", "CRH", 290), ("RMS", "ATV", 300), ("RMS", "PHV", 310),
    ("RMS", "GFD", 320), ("RMS", "LAX", 330), ("SBK", "MPC", 200), ("SBK", "SVP", 210), ("SBK", "SHD", 220),
    ("SBK", "SSV", 230), ("SBK", "OKD", 240), ("SBK", "WLB", 250), ("SBK", "CRH", 260), ("SBK", "ATV", 270),
    ("SBK", "PHV", 280), ("SBK", "GFD", 290), ("MPC", "SVP", 210), ("MPC", "SHD", 220), ("MPC", "SSV", 230),
    ("MPC", "OKD", 240), ("MPC", "WLB", 250), ("MPC", "CRH", 260), ("MPC", "ATV", 270), ("MPC", "PHV", 280),
    ("MPC", "GFD", 290), ("SVP", "SHD", 230), ("SVP", "SSV", 240), ("SVP", "OKD", 250), ("SVP", "WLB", 260),
    ("SVP", "CRH", 270), ("SVP", "ATV", 280), ("SVP", "PHV", 290), ("SVP", "GFD", 300), ("SHD", "SSV", 220),
    ("SHD", "OKD", 230), ("SHD", "WLB", 240), ("SHD", "CRH", 250), ("SHD", "ATV", 260), ("SHD", "PHV", 270),
    ("SHD", "GFD", 280), ("SSV", "OKD", 240), ("SSV", "WLB", 250), ("SSV", "CRH", 260), ("SSV", "ATV", 270),
    ("SSV", "PHV", 280), ("SSV", "GFD", 290), ("OKD", "WLB", 230), ("OKD", "CRH", 240), ("OKD", "ATV", 250),
    ("OKD", "PHV", 260), ("OKD", "GFD", 270), ("WLB", "CRH", 250), ("WLB", "ATV", 260), ("WLB", "PHV", 270),
    ("WLB", "GFD", 280), ("CRH", "ATV", 240), ("CRH", "PHV", 250), ("CRH", "GFD", 260), ("CRH", "SFO", 270),
    ("CRH", "RMS", 280), ("CRH", "HKG", 290), ("CRH", "JFK", 300), ("ATV", "PHV", 230), ("ATV", "GFD", 240),
    ("PHV", "GFD", 220), ("LHR", "CDG", 100), ("OKD", "LAX", 220),
)
_BASE_COSTS = {(origin, destination): cost for origin, destination, cost in _ROUTES}
_CLASS_FACTORS = (("economy", 1), ("business", 2), ("first", 5))  # compared with == in order, as BFCL's if-chain
_AIRPORTS = ("RMS", "SBK", "MPC", "SVP", "SHD", "CDG", "LHR", "SSV", "OKD", "WLB", "PEK", "HND", "HKG", "CIA", "CRH",
             "ATV", "PHV", "GFD", "SFO", "LAX", "JFK", "ORD", "BOS")
_NEAREST_AIRPORT = {
    "Rivermist": "RMS", "Stonebrook": "SBK", "Maplecrest": "MPC", "Silverpine": "SVP", "Shadowridge": "SHD",
    "London": "LHR", "Paris": "CDG", "Sunset Valley": "SSV", "Oakendale": "OKD", "Willowbend": "WLB",
    "Crescent Hollow": "CRH", "Autumnville": "ATV", "Pinehaven": "PHV", "Greenfield": "GFD", "San Francisco": "SFO",
    "Los Angeles": "LAX", "New York": "JFK", "Chicago": "ORD", "Boston": "BOS", "Beijing": "PEK", "Hong Kong": "HKG",
    "Rome": "CIA", "Tokyo": "HND",
}
_EXCHANGE_RATES = (("USD", "RMB", 7), ("USD", "EUR", 0.8), ("USD", "JPY", 110), ("USD", "GBP", 0.7),
                   ("USD", "CAD", 1.3), ("USD", "AUD", 1.4), ("USD", "INR", 70), ("USD", "RUB", 60),
                   ("USD", "BRL", 3.8), ("USD", "MXN", 20))
_SUPPORT_ANSWER = ("Thank you for contacting customer support. Your message has been received and we will get back "
                   "to you shortly.")


class TravelAPI:
    """BFCL's travel-booking simulator: an access token, credit cards, bookings, a budget limit, flight costs."""

    def __init__(self) -> None:
        self.credit_card_list: Any = {}
        self.booking_record: Any = {}
        self.access_token: Any = None
        self.token_type: Any = None
        self.token_expires_in: Any = None
        self.token_scope: Any = None
        self.user_first_name: Any = None
        self.user_last_name: Any = None
        self.budget_limit: Any = None
        self.long_context = False
        self._flight_cost_lookup: dict[str, dict[str, float]] = {}
        self._random = random.Random(_DEFAULTS["random_seed"])

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        defaults = deepcopy(_DEFAULTS)
        self._random = random.Random(scenario.get("random_seed", defaults["random_seed"]))
        for key in ("credit_card_list", "booking_record", "access_token", "token_type", "token_expires_in",
                    "token_scope", "user_first_name", "user_last_name", "budget_limit"):
            setattr(self, key, scenario.get(key, defaults[key]))
        self.long_context = long_context
        if long_context:  # BFCL's padding, after the scenario's own cards and bookings, never over them
            for attribute, name in (("credit_card_list", "CREDIT_CARD_EXTENSION"),
                                    ("booking_record", "BOOKING_RECORD_EXTENSION")):
                kept = getattr(self, attribute)
                for key, value in padding(name).items():
                    if key not in kept:
                        kept[key] = value

    def authenticate_travel(self, client_id: str, client_secret: str, refresh_token: str, grant_type: str,
                            user_first_name: str, user_last_name: str) -> dict[str, Any]:
        self.token_expires_in = 2
        self.access_token = str(self._random.randint(100000, 999999))
        self.token_type = "Bearer"
        self.token_scope = grant_type
        self.user_first_name = user_first_name
        self.user_last_name = user_last_name
        return {"expires_in": 2, "access_token": self.access_token, "token_type": "Bearer", "scope": grant_type}

    def travel_get_login_status(self) -> dict[str, bool]:
        return {"status": not (self.token_expires_in is None or self.token_expires_in == 0)}

    def get_budget_fiscal_year(self, lastModifiedAfter: str | None = None,
                               includeRemoved: str | None = None) -> dict[str, str]:
        return {"budget_fiscal_year": "2018"}

    def register_credit_card(self, access_token: str, card_number: str, expiration_date: str, cardholder_name: str,
                             card_verification_number: int) -> dict[str, Any]:
        if self.token_expires_in is None:
            return {"error": "Token not initialized"}
        if self.token_expires_in == 0:
            return {"error": "Token expired"}
        if access_token != self.access_token:
            return {"error": "Invalid access token"}
        if card_number in self.credit_card_list:
            return {"error": "Card already registered"}
        card_id = str(self._random.randint(100000000000, 999999999999))
        self.credit_card_list[card_id] = {
            "card_number": card_number, "expiration_date": expiration_date, "cardholder_name": cardholder_name,
            "card_verification_number": card_verification_number, "balance": self._random.randint(10000, 99999)}
        return {"card_id": card_id}

    def get_flight_cost(self, travel_from: str, travel_to: str, travel_date: str,
                        travel_class: str) -> dict[str, list[float]]:
        travel_pair = (travel_from, travel_to)
        if travel_pair not in _BASE_COSTS:
            raise ValueError("No available route for the given airports.")
        factor = next((value for name, value in _CLASS_FACTORS if travel_class == name), None)
        if factor is None:
            raise ValueError("Invalid travel class. Options are: economy, business, first.")
        digit_sum = sum(int(char) for char in travel_date if char.isdigit())
        date_multiplier = 2 if digit_sum % 2 == 0 else 1
        if self.long_context:  # every route's cost, each kept for book_flight
            self._flight_cost_lookup = {}
            costs = []
            for (origin, destination), base in _BASE_COSTS.items():
                cost = float(base * factor * date_multiplier)
                self._flight_cost_lookup[f"{origin}|{destination}|{travel_class}|{travel_date}"] = {"cost": cost}
                costs.append(cost)
            return {"travel_cost_list": costs}
        cost = float(_BASE_COSTS[travel_pair] * factor * date_multiplier)
        self._flight_cost_lookup = {f"{travel_from}|{travel_to}|{travel_class}|{travel_date}": {"cost": cost}}
        return {"travel_cost_list": [cost]}

    def get_credit_card_balance(self, access_token: str, card_id: str) -> dict[str, Any]:
        if self.token_expires_in == 0:
            return {"error": "Token expired"}
        if access_token != self.access_token:
            return {"error": "Invalid access token"}
        if card_id not in self.credit_card_list:
            return {"error": "Card not registered. Here are a list of card_id's: "
                             + str(list(self.credit_card_list.keys()))}
        return {"card_balance": self.credit_card_list[card_id]["balance"]}

    def book_flight(self, access_token: str, card_id: str, travel_date: str, travel_from: str, travel_to: str,
                    travel_class: str) -> dict[str, Any]:
        if self.token_expires_in == 0:
            return {"booking_status": False, "error": "Token expired"}
        if access_token != self.access_token:
            return {"booking_status": False, "error": "Invalid access token"}
        if card_id not in self.credit_card_list:
            return {"booking_status": False, "error": "Card not registered"}
        if "balance" not in self.credit_card_list[card_id]:
            return {"booking_status": False, "error": "Balance not found"}
        airports = self.list_all_airports()
        if travel_from not in airports:
            return {"booking_status": False, "error": f"Invalid departure airport code: {travel_from}"}
        if travel_to not in airports:
            return {"booking_status": False, "error": f"Invalid destination airport code: {travel_to}"}
        try:
            datetime.strptime(travel_date, "%Y-%m-%d")
        except ValueError:
            return {"booking_status": False, "error": "Invalid date format. Use YYYY-MM-DD."}
        if travel_class not in {"economy", "business", "first"}:
            # BFCL prints its set of the classes, whose order changes from one Python process to another (its
            # strings' hashes are salted per process); here it is always its source's order
            return {"booking_status": False,
                    "error": "Invalid travel class. Must be one of {'economy', 'business', 'first'}"}
        try:
            self.get_flight_cost(travel_from=travel_from, travel_to=travel_to, travel_date=travel_date,
                                 travel_class=travel_class)
            entry = self._flight_cost_lookup.get(f"{travel_from}|{travel_to}|{travel_class}|{travel_date}")
            if entry is None:
                return {"booking_status": False, "error": "No available route for the given parameters"}
            travel_cost = entry["cost"]
        except ValueError as exc:
            return {"booking_status": False, "error": str(exc)}
        card = self.credit_card_list[card_id]
        if card["balance"] < travel_cost:
            return {"booking_status": False, "error": "Insufficient funds"}
        if self.budget_limit is not None and card["balance"] < self.budget_limit:
            return {"booking_status": False, "error": "Balance is less than budget limit"}
        card["balance"] -= travel_cost
        booking_id = str(self._random.randint(1000000, 9999999))
        transaction_id = str(self._random.randint(10000000, 99999999))
        self.booking_record[booking_id] = {
            "card_id": card_id, "travel_date": travel_date, "travel_from": travel_from, "travel_to": travel_to,
            "travel_class": travel_class, "travel_cost": travel_cost, "transaction_id": transaction_id}
        return {"booking_id": booking_id, "transaction_id": transaction_id, "booking_status": True,
                "booking_history": self.booking_record if self.long_context else {}}

    def retrieve_invoice(self, access_token: str, booking_id: str | None = None,
                         insurance_id: str | None = None) -> dict[str, Any]:
        if self.token_expires_in == 0:
            return {"error": "Token expired"}
        if access_token != self.access_token:
            return {"error": "Invalid access token"}
        if booking_id not in self.booking_record:
            return {"error": "Booking not found"}
        booking = self.booking_record[booking_id]
        return {"invoice": {"booking_id": booking_id, **{key: booking[key] for key in (
            "travel_date", "travel_from", "travel_to", "travel_class", "travel_cost", "transaction_id")}}}

    def get_booking_history(self, access_token: str) -> dict[str, Any]:
        if self.token_expires_in == 0:
            return {"error": "Token expired"}
        if access_token != self.access_token:
            return {"error": "Invalid access token"}
        return {"booking_history": deepcopy(self.booking_record)}

    def list_all_airports(self) -> list[str]:
        return list(_AIRPORTS)

    def cancel_booking(self, access_token: str, booking_id: str) -> dict[str, Any]:
        if self.token_expires_in == 0:
            return {"cancel_status": False, "error": "Token expired"}
        if access_token != self.access_token:
            return {"cancel_status": False, "error": "Invalid access token"}
        if booking_id not in self.booking_record:
            return {"cancel_status": False, "error": "Booking not found"}
        card_id = self.booking_record[booking_id]["card_id"]
        travel_cost = self.booking_record[booking_id]["travel_cost"]
        self.credit_card_list[card_id]["balance"] += travel_cost
        del self.booking_record[booking_id]
        return {"cancel_status": True}

    def compute_exchange_rate(self, base_currency: str, target_currency: str, value: float) -> dict[str, float]:
        for base, target, rate in _EXCHANGE_RATES:
            if base_currency == base and target_currency == target:
                return {"exchanged_value": float(value * rate)}
            if base_currency == target and target_currency == base:
                return {"exchanged_value": round(value / rate, 2)}
        raise ValueError("No available exchange rate for the given currencies.")

    def verify_traveler_information(self, first_name: str, last_name: str, date_of_birth: str,
                                    passport_number: str) -> dict[str, Any]:
        if self.user_first_name != first_name or self.user_last_name != last_name:
            return {"verification_status": False,
                    "verification_failure": "Cannot book flight information for another user."
                    + f"Expected {self.user_first_name} {self.user_last_name}, got {first_name} {last_name}"}
        try:  # age on today's date, as BFCL computes it
            birth_date = datetime.strptime(date_of_birth, "%Y-%m-%d")
            today = datetime.today()
            age = today.year - birth_date.year - ((today.month, today.day) < (birth_date.month, birth_date.day))
        except ValueError:
            return {"verification_status": False,
                    "verification_failure": "Invalid date of birth format. Please use YYYY-MM-DD."}
        if age < 18:
            return {"verification_status": False, "verification_failure": "Traveler must be at least 18 years old."}
        if not passport_number.startswith("US"):
            return {"verification_status": False,
                    "verification_failure": "Passport must be issued by the United States."}
        return {"verification_status": True}

    def set_budget_limit(self, access_token: str, budget_limit: float) -> dict[str, Any]:
        if self.token_expires_in == 0:
            return {"error": "Token expired"}
        if access_token != self.access_token:
            return {"error": "Invalid access token"}
        budget_limit = float(budget_limit)
        self.budget_limit = budget_limit
        return {"budget_limit": budget_limit}

    def get_nearest_airport_by_city(self, location: str) -> dict[str, str]:
        return {"nearest_airport": _NEAREST_AIRPORT.get(location, "Unknown")}

    def purchase_insurance(self, access_token: str, insurance_type: str, booking_id: str, insurance_cost: float,
                           card_id: str) -> dict[str, Any]:
        if self.token_expires_in == 0:
            return {"insurance_status": False, "error": "Token expired"}
        if access_token != self.access_token:
            return {"insurance_status": False, "error": "Invalid access token"}
        if self.budget_limit is not None and self.budget_limit < insurance_cost:
            return {"insurance_status": False, "error": "Exceeded budget limit"}
        if booking_id not in self.booking_record:
            return {"insurance_status": False, "error": "Booking not found"}
        if card_id not in self.credit_card_list:
            return {"insurance_status": False, "error": "Credit card not registered"}
        self.credit_card_list[card_id]["balance"] -= insurance_cost
        return {"insurance_id": str(self._random.randint(100000000, 999999999)), "insurance_status": True}

    def contact_customer_support(self, booking_id: str, message: str) -> dict[str, str]:
        if booking_id not in self.booking_record:
            return {"error": "Booking not found"}
        return {"customer_support_message": _SUPPORT_ANSWER}

    def get_all_credit_cards(self) -> dict[str, Any]:
        return {"credit_card_list": self.credit_card_list}

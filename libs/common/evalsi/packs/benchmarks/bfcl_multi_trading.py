"""BFCL's ``TradingBot`` simulator, native (bfcl-eval 2026.3.23's ``func_source_code/trading_bot.py``, method for
method: attribute names, signatures, return values, error texts, and its seeded transaction timestamps, rendered in
local time as BFCL renders them), with its ``long_context`` variant: answers padded with BFCL's long-context data
(``bfcl_multi_long_context``) as BFCL pads them (a stock's moving averages, an order's metadata, the watch list, the
transaction history, a sector's stocks); the state is the same as without it.
"""

from __future__ import annotations

import random
from copy import deepcopy
from datetime import datetime, timedelta
from typing import Any

from evalsi.packs.benchmarks.bfcl_multi_long_context import long_context_data

CURRENT_TIME = datetime(2024, 9, 1, 10, 30)
_STOCK = ("price", "percent_change", "volume", "MA(5)", "MA(20)")
_DEFAULTS: dict[str, Any] = {
    "orders": {12345: {"id": 12345, "order_type": "Buy", "symbol": "AAPL", "price": 210.65, "amount": 10,
                       "status": "Completed"},
               12446: {"id": 12446, "order_type": "Sell", "symbol": "GOOG", "price": 2840.56, "amount": 5,
                       "status": "Pending"}},
    "account_info": {"account_id": 12345, "balance": 10000.0, "binding_card": 1974202140965533},
    "authenticated": False,
    "market_status": "Closed",
    "order_counter": 12446,
    "stocks": {symbol: dict(zip(_STOCK, values, strict=True)) for symbol, values in {
        "AAPL": (227.16, 0.17, 2.552, 227.11, 227.09), "GOOG": (2840.34, 0.24, 1.123, 2835.67, 2842.15),
        "TSLA": (667.92, -0.12, 1.654, 671.15, 668.2), "MSFT": (310.23, 0.09, 3.234, 309.88, 310.11),
        "NVDA": (220.34, 0.34, 1.234, 220.45, 220.67), "ALPH": (1320.45, -0.08, 1.567, 1321.12, 1325.78),
        "OMEG": (457.23, 0.12, 2.345, 456.78, 458.12), "QUAS": (725.89, -0.03, 1.789, 726.45, 728.0),
        "NEPT": (88.34, 0.19, 0.654, 88.21, 88.67), "SYNX": (345.67, 0.11, 2.112, 345.34, 346.12),
        "ZETA": (22.09, -0.05, 0.789, 22.12, 22.34)}.items()},
    "watch_list": ["NVDA"],
    "transaction_history": [],
    "random_seed": 1053520,
}
_SYMBOLS = {"Apple": "AAPL", "Google": "GOOG", "Tesla": "TSLA", "Microsoft": "MSFT", "Nvidia": "NVDA",
            "Zeta Corp": "ZETA", "Alpha Tech": "ALPH", "Omega Industries": "OMEG", "Quasar Ltd.": "QUAS",
            "Neptune Systems": "NEPT", "Synex Solutions": "SYNX", "Amazon": "AMZN", "Gorilla": "GORI"}


class TradingBot:
    """BFCL's stock-trading simulator: orders, an account, a watch list, market data, a login."""

    def __init__(self) -> None:
        self.orders: Any = {}
        self.account_info: Any = {}
        self.authenticated: Any = False
        self.market_status: Any = "Closed"
        self.order_counter: Any = 0
        self.stocks: Any = {}
        self.watch_list: Any = []
        self.transaction_history: Any = []
        self.long_context = False
        self._random = random.Random(_DEFAULTS["random_seed"])

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        defaults = deepcopy(_DEFAULTS)
        for key in ("orders", "account_info", "authenticated", "market_status", "order_counter", "stocks",
                    "watch_list", "transaction_history"):
            setattr(self, key, scenario.get(key, defaults[key]))
        # JSON's order ids are strings: BFCL makes the numeric ones ints again
        self.orders = {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in self.orders.items()}
        self.long_context = long_context
        self._random = random.Random(scenario.get("random_seed", defaults["random_seed"]))

    def _generate_transaction_timestamp(self) -> str:
        start, end = int(CURRENT_TIME.timestamp()), int((CURRENT_TIME + timedelta(days=1)).timestamp())
        return datetime.fromtimestamp(self._random.randint(start, end)).strftime("%Y-%m-%d %H:%M:%S")

    def get_current_time(self) -> dict[str, str]:
        return {"current_time": CURRENT_TIME.strftime("%I:%M %p")}

    def get_symbol_by_name(self, name: str) -> dict[str, str]:
        return {"symbol": _SYMBOLS.get(name, "Stock not found")}

    def get_stock_info(self, symbol: str) -> dict[str, Any]:
        if symbol not in self.stocks:
            return {"error": f"Stock with symbol '{symbol}' not found."}
        if self.long_context:
            stock = self.stocks[symbol].copy()
            stock["MA(5)"] = long_context_data()["MA_5_EXTENSION"]
            stock["MA(20)"] = long_context_data()["MA_20_EXTENSION"]
            return stock
        return self.stocks[symbol]

    def get_order_details(self, order_id: int) -> dict[str, Any]:
        if order_id not in self.orders:
            return {"error": f"Order with ID {order_id} not found." + "Here is the list of orders_id: "
                    + str(list(self.orders.keys()))}
        if self.long_context:
            order = self.orders[order_id].copy()
            symbol = order["symbol"]
            metadata = {}
            for key, template in long_context_data()["ORDER_DETAIL_EXTENSION"].items():
                try:  # str.format of BFCL's text with the order's symbol, as BFCL formats it
                    metadata[key] = template.format(symbol=symbol)
                except KeyError as exc:
                    return {"error": f"KeyError during formatting: {exc!s}"}
            order["metadata"] = metadata
            return order
        return self.orders[order_id]

    def cancel_order(self, order_id: int) -> dict[str, Any]:
        if order_id not in self.orders:
            return {"error": f"Order with ID {order_id} not found."}
        if self.orders[order_id]["status"] == "Completed":
            return {"error": f"Can't cancel order {order_id}. Order is already completed."}
        self.orders[order_id]["status"] = "Cancelled"
        return {"order_id": order_id, "status": "Cancelled"}

    def place_order(self, order_type: str, symbol: str, price: float, amount: int) -> dict[str, Any]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please log in to place an order."}
        if symbol not in self.stocks:
            return {"error": f"Invalid stock symbol: {symbol}"}
        if price <= 0 or amount <= 0:
            return {"error": "Price and amount must be positive values."}
        if order_type.lower() == "buy":
            total_cost = float(price) * int(amount)
            if total_cost > self.account_info.get("balance", 0):
                return {"error": f"Insufficient funds: required ${total_cost:.2f} but only "
                                 f"${self.account_info.get('balance', 0):.2f} available."}
        price = float(price)
        order_id = self.order_counter
        self.orders[order_id] = {"id": order_id, "order_type": order_type, "symbol": symbol, "price": price,
                                 "amount": amount, "status": "Open"}
        self.order_counter += 1
        return {"order_id": order_id, "order_type": order_type, "status": "Pending", "price": price,
                "amount": amount}

    def withdraw_funds(self, amount: float) -> dict[str, Any]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please log in to make a transaction."}
        if self.market_status != "Open":
            return {"error": "Market is closed. Transactions are not allowed."}
        if amount <= 0:
            return {"error": "Transaction amount must be positive."}
        if amount > self.account_info["balance"]:
            return {"error": "Insufficient funds for withdrawal."}
        self.account_info["balance"] -= amount
        self.transaction_history.append({"type": "withdrawal", "amount": amount,
                                         "timestamp": self._generate_transaction_timestamp()})
        return {"status": "Withdrawal successful", "new_balance": self.account_info["balance"]}

    def get_account_info(self) -> dict[str, Any]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please log in to view account information."}
        return self.account_info

    def trading_login(self, username: str, password: str) -> dict[str, str]:
        if self.authenticated:
            return {"status": "Already logged in"}
        self.authenticated = True
        return {"status": "Logged in successfully"}

    def trading_get_login_status(self) -> dict[str, bool]:
        return {"status": bool(self.authenticated)}

    def trading_logout(self) -> dict[str, str]:
        if not self.authenticated:
            return {"status": "No user is currently logged in"}
        self.authenticated = False
        return {"status": "Logged out successfully"}

    def fund_account(self, amount: float) -> dict[str, Any]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please log in to fund the account."}
        if amount <= 0:
            return {"error": "Funding amount must be positive."}
        self.account_info["balance"] += amount
        self.transaction_history.append({"type": "deposit", "amount": amount,
                                         "timestamp": self._generate_transaction_timestamp()})
        return {"status": "Account funded successfully", "new_balance": self.account_info["balance"]}

    def remove_stock_from_watchlist(self, symbol: str) -> dict[str, str]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please log in to modify the watchlist."}
        if symbol not in self.watch_list:
            return {"error": f"Stock {symbol} not found in watchlist."}
        self.watch_list.remove(symbol)
        return {"status": f"Stock {symbol} removed from watchlist successfully."}

    def get_watchlist(self) -> Any:
        if not self.authenticated:  # a list, not a dict, as BFCL returns it
            return ["Error: User not authenticated. Please log in to view the watchlist."]
        if self.long_context:  # a list, not a dict, as BFCL returns it padded
            watch_list = self.watch_list.copy()
            watch_list.extend(long_context_data()["WATCH_LIST_EXTENSION"])
            return watch_list
        return {"watchlist": self.watch_list}

    def get_order_history(self) -> Any:
        if not self.authenticated:
            return [{"error": "User not authenticated. Please log in to view order history."}]
        return {"history": list(self.orders.keys())}

    def get_transaction_history(self, start_date: str | None = None, end_date: str | None = None) -> Any:
        if not self.authenticated:
            return [{"error": "User not authenticated. Please log in to view transaction history."}]
        start = datetime.strptime(start_date, "%Y-%m-%d") if start_date else datetime.min
        end = datetime.strptime(end_date, "%Y-%m-%d") if end_date else datetime.max
        history = [transaction for transaction in self.transaction_history
                   if start <= datetime.strptime(transaction["timestamp"], "%Y-%m-%d %H:%M:%S") <= end]
        if self.long_context:
            history.extend(long_context_data()["TRANSACTION_HISTORY_EXTENSION"])
        return {"transaction_history": history}

    def get_available_stocks(self, sector: str) -> dict[str, Any]:
        sectors = {"Technology": ["AAPL", "GOOG", "MSFT", "NVDA"], "Automobile": ["TSLA", "F", "GM"]}
        if self.long_context:  # BFCL's padding lists start with these symbols again
            data = long_context_data()
            sectors = {"Technology": sectors["Technology"] + data["TECHNOLOGY_EXTENSION"],
                       "Automobile": sectors["Automobile"] + data["AUTOMOBILE_EXTENSION"]}
        return {"stock_list": sectors.get(sector, [])}

    def filter_stocks_by_price(self, stocks: list[str], min_price: float, max_price: float) -> dict[str, Any]:
        return {"filtered_stocks": [symbol for symbol in stocks
                                    if self.stocks.get(symbol, {}).get("price", 0) >= min_price
                                    and self.stocks.get(symbol, {}).get("price", 0) <= max_price]}

    def add_to_watchlist(self, stock: str) -> dict[str, Any]:
        if stock not in self.watch_list and stock in self.stocks:
            self.watch_list.append(stock)
        return {"watchlist": self.watch_list}

    def notify_price_change(self, stocks: list[str], threshold: float) -> dict[str, str]:
        changed = [symbol for symbol in stocks
                   if symbol in self.stocks and abs(self.stocks[symbol]["percent_change"]) >= threshold]
        if changed:
            return {"notification": f"Stocks {', '.join(changed)} have significant price changes."}
        return {"notification": "No significant price changes in the selected stocks."}

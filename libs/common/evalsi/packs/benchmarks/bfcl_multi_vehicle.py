"""BFCL's ``VehicleControlAPI`` simulator, native (bfcl-eval 2026.3.23's ``func_source_code/vehicle_control.py``,
method for method: attribute names, signatures, return values, error texts, and its seeded random readings), with its
``long_context`` variant: answers padded with BFCL's long-context data (``bfcl_multi_long_context``) as BFCL pads
them (the car's metadata, a parking-brake manual, a weather history, intermediary cities); the state is the same as
without it.
"""

from __future__ import annotations

import random
from copy import deepcopy
from typing import Any

from evalsi.packs.benchmarks.bfcl_multi_long_context import long_context_data, padding

MAX_FUEL_LEVEL = 50
MIN_FUEL_LEVEL = 0.0
MILE_PER_GALLON = 20.0
_DEFAULTS: dict[str, Any] = {
    "random_seed": 141053, "fuelLevel": 0.0, "batteryVoltage": 12.6, "engine_state": "stopped",
    "remainingUnlockedDoors": 4,
    "doorStatus": {"driver": "unlocked", "passenger": "unlocked", "rear_left": "unlocked", "rear_right": "unlocked"},
    "acTemperature": 25.0, "fanSpeed": 50, "acMode": "auto", "humidityLevel": 50.0, "headLightStatus": "off",
    "parkingBrakeStatus": "released", "_parkingBrakeForce": 0.0, "_slopeAngle": 0.0, "brakePedalStatus": "released",
    "brakePedalForce": 0.0, "distanceToNextVehicle": 50.0, "cruiseStatus": "inactive", "destination": "None",
    "frontLeftTirePressure": 32.0, "frontRightTirePressure": 32.0, "rearLeftTirePressure": 30.0,
    "rearRightTirePressure": 30.0,
}
# (scenario key, attribute): BFCL reads a few under other names than it keeps them
_LOADED = (("fuelLevel", "fuelLevel"), ("batteryVoltage", "batteryVoltage"), ("engineState", "engine_state"),
           ("remainingUnlockedDoors", "remainingUnlockedDoors"), ("doorStatus", "doorStatus"),
           ("acTemperature", "acTemperature"), ("fanSpeed", "fanSpeed"), ("acMode", "acMode"),
           ("humidityLevel", "humidityLevel"), ("headLightStatus", "headLightStatus"),
           ("parkingBrakeStatus", "parkingBrakeStatus"), ("parkingBrakeForce", "_parkingBrakeForce"),
           ("slopeAngle", "_slopeAngle"), ("brakePedalStatus", "brakePedalStatus"),
           ("brakePedalForce", "_brakePedalForce"), ("distanceToNextVehicle", "distanceToNextVehicle"),
           ("cruiseStatus", "cruiseStatus"), ("destination", "destination"),
           ("frontLeftTirePressure", "frontLeftTirePressure"), ("frontRightTirePressure", "frontRightTirePressure"),
           ("rearLeftTirePressure", "rearLeftTirePressure"), ("rearRightTirePressure", "rearRightTirePressure"))
_DEFAULT_KEYS = {"engineState": "engine_state", "parkingBrakeForce": "_parkingBrakeForce",
                 "slopeAngle": "_slopeAngle"}
# compared with == one by one, as BFCL's if-chains compare them (an unhashable argument is no error there)
_DISTANCES = ((("83214", "74532"), 750.0), (("56108", "62947"), 320.0), (("71354", "83462"), 450.0),
              (("47329", "52013"), 290.0), (("69238", "51479"), 630.0), (("94016", "83214"), 980.0),
              (("94016", "94704"), 600.0), (("94704", "08540"), 2550.0), (("94016", "08540"), 1950.0),
              (("62947", "47329"), 1053.0), (("94016", "62947"), 780.0), (("74532", "94016"), 880.0))
_ZIPCODES = (("Rivermist", "83214"), ("Stonebrook", "74532"), ("Maplecrest", "56108"), ("Silverpine", "62947"),
             ("Shadowridge", "71354"), ("Sunset Valley", "83462"), ("Oakendale", "47329"), ("Willowbend", "52013"),
             ("Crescent Hollow", "69238"), ("Autumnville", "51479"), ("San Francisco", "94016"))


class VehicleControlAPI:
    """BFCL's car simulator: engine, doors, fuel, climate, lights, brakes, cruise control, navigation, tires."""

    def __init__(self) -> None:
        # declared, set by _load_scenario (as in BFCL)
        self.fuelLevel: Any
        self.batteryVoltage: Any
        self.engine_state: Any
        self.remainingUnlockedDoors: Any
        self.doorStatus: Any
        self.acTemperature: Any
        self.fanSpeed: Any
        self.acMode: Any
        self.humidityLevel: Any
        self.headLightStatus: Any
        self.parkingBrakeStatus: Any
        self._parkingBrakeForce: Any
        self._slopeAngle: Any
        self.brakePedalStatus: Any
        self._brakePedalForce: Any
        self.distanceToNextVehicle: Any
        self.cruiseStatus: Any
        self.destination: Any
        self.frontLeftTirePressure: Any
        self.frontRightTirePressure: Any
        self.rearLeftTirePressure: Any
        self.rearRightTirePressure: Any
        self._random = random.Random(_DEFAULTS["random_seed"])
        self.long_context = False

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        defaults = deepcopy(_DEFAULTS)
        self._random = random.Random(scenario.get("random_seed", defaults["random_seed"]))
        for key, attribute in _LOADED:
            setattr(self, attribute, scenario.get(key, defaults[_DEFAULT_KEYS.get(key, key)]))
            if key == "doorStatus":  # BFCL counts the unlocked doors again from the doors it was given
                self.remainingUnlockedDoors = 4 - len(
                    [1 for door in self.doorStatus if self.doorStatus[door] == "locked"])
        self.long_context = long_context

    def startEngine(self, ignitionMode: str) -> dict[str, Any]:
        if ignitionMode == "STOP":
            self.engine_state = "stopped"
        if self.remainingUnlockedDoors > 0:
            return {"error": "All doors must be locked before starting the engine. Here are the unlocked doors: "
                             + ", ".join([door for door, status in self.doorStatus.items() if status == "unlocked"])}
        if self.brakePedalStatus != "pressed":
            return {"error": "Brake pedal needs to be pressed when starting the engine."}
        if self._brakePedalForce != 1000.0:
            return {"error": "Must press the brake fully before starting the engine."}
        if self.fuelLevel < MIN_FUEL_LEVEL:
            return {"error": "Fuel tank is empty."}
        if ignitionMode == "START":
            self.engine_state = "running"
        else:
            return {"error": "Invalid ignition mode."}
        return {"engineState": self.engine_state, "fuelLevel": self.fuelLevel, "batteryVoltage": self.batteryVoltage}

    def fillFuelTank(self, fuelAmount: float) -> dict[str, Any]:
        if fuelAmount < 0:
            return {"error": "Fuel amount cannot be negative."}
        if self.fuelLevel + fuelAmount > MAX_FUEL_LEVEL:
            return {"error": "Cannot fill gas above the tank capacity."}
        if self.fuelLevel + fuelAmount < MIN_FUEL_LEVEL:
            return {"error": "Fuel tank is empty. Min fuel level is 0 gallons."}
        self.fuelLevel += fuelAmount
        return {"fuelLevel": self.fuelLevel}

    def lockDoors(self, unlock: bool, door: list[str]) -> dict[str, Any]:
        wanted = "unlocked" if unlock else "locked"
        for d in door:
            if self.doorStatus[d] == wanted:
                continue
            self.doorStatus[d] = wanted
            self.remainingUnlockedDoors += 1 if unlock else -1
        return {"lockStatus": wanted, "remainingUnlockedDoors": self.remainingUnlockedDoors}

    def adjustClimateControl(self, temperature: float, unit: str = "celsius", fanSpeed: int = 50,
                             mode: str = "auto") -> dict[str, Any]:
        if not 0 <= fanSpeed <= 100:
            return {"error": "Fan speed must be between 0 and 100."}
        self.acTemperature = temperature
        if unit == "fahrenheit":
            self.acTemperature = (temperature - 32) * 5 / 9
        self.fanSpeed = fanSpeed
        self.acMode = mode
        return {"currentACTemperature": temperature, "climateMode": mode, "humidityLevel": self.humidityLevel}

    def get_outside_temperature_from_google(self) -> dict[str, Any]:
        if self.long_context:  # BFCL sets the reading on its module-level weather history and returns that
            weather = padding("LONG_WEATHER_EXTENSION")
            weather["outsideTemperature"] = self._random.uniform(-10.0, 40.0)
            return weather
        return {"outsideTemperature": self._random.uniform(-10.0, 40.0)}

    def get_outside_temperature_from_weather_com(self) -> dict[str, int]:
        return {"error": 404}

    def setHeadlights(self, mode: str) -> dict[str, str]:
        if mode not in ["on", "off", "auto"]:
            return {"error": "Invalid headlight mode."}
        self.headLightStatus = "on" if mode == "on" else "off"
        return {"headlightStatus": self.headLightStatus}

    def displayCarStatus(self, option: str) -> dict[str, Any]:
        shown: dict[str, tuple[tuple[str, str], ...]] = {
            "fuel": (("fuelLevel", "fuelLevel"),), "battery": (("batteryVoltage", "batteryVoltage"),),
            "doors": (("doorStatus", "doorStatus"),),
            "climate": (("currentACTemperature", "acTemperature"), ("fanSpeed", "fanSpeed"),
                        ("climateMode", "acMode"), ("humidityLevel", "humidityLevel")),
            "headlights": (("headlightStatus", "headLightStatus"),),
            "parkingBrake": (("parkingBrakeStatus", "parkingBrakeStatus"), ("parkingBrakeForce", "_parkingBrakeForce"),
                             ("slopeAngle", "_slopeAngle")),
            "brakePedal": (("brakePedalStatus", "brakePedalStatus"), ("brakePedalForce", "_brakePedalForce")),
            "engine": (("engineState", "engine_state"),),
        }
        status = {"metadata": long_context_data()["CAR_STATUS_METADATA_EXTENSION"]} if self.long_context else {}
        fields = next((value for key, value in shown.items() if option == key), None)
        if fields is None:
            return {**status, "error": "Invalid option"}
        return {**status, **{name: getattr(self, attribute) for name, attribute in fields}}

    def activateParkingBrake(self, mode: str) -> dict[str, Any]:
        if mode not in ["engage", "release"]:
            return {"error": "Invalid mode"}
        self.parkingBrakeStatus = "engaged" if mode == "engage" else "released"
        self._parkingBrakeForce = 500.0 if mode == "engage" else 0.0
        self._slopeAngle = 10.0
        status = {"parkingBrakeStatus": self.parkingBrakeStatus, "_parkingBrakeForce": self._parkingBrakeForce,
                  "_slopeAngle": 10.0}
        if self.long_context:  # the manual first, as BFCL answers
            return {"parkingBrakeInstruction": long_context_data()["PARKING_BRAKE_INSTRUCTION"], **status}
        return status

    def pressBrakePedal(self, pedalPosition: float) -> dict[str, Any]:
        if not 0 <= pedalPosition <= 1:
            return {"error": "Pedal position must be between 0 and 1."}
        if pedalPosition == 0:
            self.brakePedalStatus = "released"
            self._brakePedalForce = 0.0
            return {"brakePedalStatus": "released", "brakePedalForce": 0.0}
        force = pedalPosition * 1000
        self.brakePedalStatus = "pressed"
        self._brakePedalForce = force
        return {"brakePedalStatus": "pressed", "brakePedalForce": float(force)}

    def releaseBrakePedal(self) -> dict[str, Any]:
        self.brakePedalStatus = "released"
        self._brakePedalForce = 0.0
        return {"brakePedalStatus": "released", "brakePedalForce": 0.0}

    def setCruiseControl(self, speed: float, activate: bool,
                         distanceToNextVehicle: float) -> dict[str, Any]:
        distanceToNextVehicle = float(distanceToNextVehicle)
        speed = float(speed)
        if self.engine_state == "stopped":
            return {"error": "Start the engine before activating the cruise control."}
        self.distanceToNextVehicle = distanceToNextVehicle
        if activate:
            if speed < 0 or speed > 120 or speed % 5 != 0:
                return {"error": "Invalid speed"}
            self.cruiseStatus = "active"
        else:
            self.cruiseStatus = "inactive"
        return {"cruiseStatus": self.cruiseStatus, "currentSpeed": speed,
                "distanceToNextVehicle": distanceToNextVehicle}

    def get_current_speed(self) -> dict[str, float]:
        return {"currentSpeed": self._random.uniform(0.0, 120.0)}

    def display_log(self, messages: list[str]) -> dict[str, Any]:
        return {"log": messages}

    def estimate_drive_feasibility_by_mileage(self, distance: float) -> dict[str, bool]:
        return {"canDrive": not self.fuelLevel * MILE_PER_GALLON < distance}

    def liter_to_gallon(self, liter: float) -> dict[str, float]:
        return {"gallon": liter * 0.264172}

    def gallon_to_liter(self, gallon: float) -> dict[str, float]:
        return {"liter": gallon * 3.78541}

    def estimate_distance(self, cityA: str, cityB: str) -> dict[str, Any]:
        found: dict[str, Any] = next(({"distance": distance} for (a, b), distance in _DISTANCES
                                      if (cityA == a and cityB == b) or (cityA == b and cityB == a)),
                                     {"error": "distance not found in database."})
        if self.long_context:
            found["intermediaryCities"] = long_context_data()["INTERMEDIARY_CITIES"]
        return found

    def get_zipcode_based_on_city(self, city: str) -> dict[str, str]:
        return {"zipcode": next((zipcode for name, zipcode in _ZIPCODES if city == name), "00000")}

    def set_navigation(self, destination: str) -> dict[str, str]:
        self.destination = destination
        return {"status": "Navigating to " + destination}

    def check_tire_pressure(self) -> dict[str, Any]:
        pressures = {"frontLeftTirePressure": self.frontLeftTirePressure,
                     "frontRightTirePressure": self.frontRightTirePressure,
                     "rearLeftTirePressure": self.rearLeftTirePressure,
                     "rearRightTirePressure": self.rearRightTirePressure}
        healthy = 30 <= (self.frontLeftTirePressure + self.frontRightTirePressure + self.rearLeftTirePressure
                         + self.rearRightTirePressure) / 4 <= 35
        car_info = long_context_data()["CAR_STATUS_METADATA_EXTENSION"] if self.long_context else {}
        return {**pressures, "healthy_tire_pressure": healthy, "car_info": car_info}

    def find_nearest_tire_shop(self) -> dict[str, str]:
        return {"shopLocation": "456 Oakwood Avenue, Rivermist, 83214"}

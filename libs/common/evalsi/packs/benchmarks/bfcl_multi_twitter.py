"""BFCL's ``TwitterAPI`` simulator, native (bfcl-eval 2026.3.23's ``func_source_code/posting_api.py``, method for
method: attribute names, signatures, return values and error texts). It has no long-context variant: BFCL's class
ignores ``long_context``.

One thing is kept per simulator where BFCL keeps it per process. BFCL's ``post_tweet(content, tags=[],
mentions=[])`` has Python's shared mutable defaults: every tweet posted without ``mentions`` holds the same list, so
``mention`` on one of them adds the names to all of them, in every ``TwitterAPI`` of the process (the model's, the
possible answer's, later questions'). Here the tweets of one simulator share one such list, as they do in a single
BFCL simulator, and no other simulator sees it.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

_DEFAULTS: dict[str, Any] = {
    "username": "john", "password": "john123", "authenticated": False, "tweets": {}, "comments": {},
    "retweets": {}, "following_list": ["alice", "bob"], "tweet_counter": 0,
}
_OMITTED: Any = object()  # stands for BFCL's default list, which is this simulator's own (see the docstring)


class TwitterAPI:
    """BFCL's social-media simulator: a user, a login, tweets by id, comments, retweets, a following list."""

    def __init__(self) -> None:
        self.username: Any = None
        self.password: Any = None
        self.authenticated: Any = False
        self.tweets: Any = {}
        self.comments: Any = {}
        self.retweets: Any = {}
        self.following_list: Any = []
        self.tweet_counter: Any = 0
        self._default_tags: list[Any] = []
        self._default_mentions: list[Any] = []

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        defaults = deepcopy(_DEFAULTS)
        for key in ("username", "password", "authenticated", "tweets", "comments", "retweets", "following_list",
                    "tweet_counter"):
            setattr(self, key, scenario.get(key, defaults[key]))
        self.tweets = {int(k): v for k, v in self.tweets.items()}  # JSON's keys are strings; BFCL's ids are ints

    def authenticate_twitter(self, username: str, password: str) -> dict[str, bool]:
        if username == self.username and password == self.password:
            self.authenticated = True
            return {"authentication_status": True}
        return {"authentication_status": False}

    def posting_get_login_status(self) -> dict[str, bool]:
        return {"login_status": bool(self.authenticated)}

    def post_tweet(self, content: str, tags: list[str] = _OMITTED, mentions: list[str] = _OMITTED) -> dict[str, Any]:
        if tags is _OMITTED:
            tags = self._default_tags
        if mentions is _OMITTED:
            mentions = self._default_mentions
        if not self.authenticated:
            return {"error": "User not authenticated. Please authenticate before posting."}
        tweet = {"id": self.tweet_counter, "username": self.username, "content": content, "tags": tags,
                 "mentions": mentions}
        self.tweets[self.tweet_counter] = tweet
        self.tweet_counter += 1
        return tweet

    def retweet(self, tweet_id: int) -> dict[str, str]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please authenticate before retweeting."}
        if tweet_id not in self.tweets:
            return {"error": f"Tweet with ID {tweet_id} not found."}
        if self.username not in self.retweets:
            self.retweets[self.username] = []
        if tweet_id in self.retweets[self.username]:
            return {"retweet_status": "Already retweeted"}
        self.retweets[self.username].append(tweet_id)
        return {"retweet_status": "Successfully retweeted"}

    def comment(self, tweet_id: int, comment_content: str) -> dict[str, str]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please authenticate before commenting."}
        if tweet_id not in self.tweets:
            return {"error": f"Tweet with ID {tweet_id} not found."}
        if tweet_id not in self.comments:
            self.comments[tweet_id] = []
        self.comments[tweet_id].append({"username": self.username, "content": comment_content})
        return {"comment_status": "Comment added successfully"}

    def mention(self, tweet_id: int, mentioned_usernames: list[str]) -> dict[str, str]:
        if tweet_id not in self.tweets:
            return {"error": f"Tweet with ID {tweet_id} not found."}
        self.tweets[tweet_id]["mentions"].extend(mentioned_usernames)
        return {"mention_status": "Users mentioned successfully"}

    def follow_user(self, username_to_follow: str) -> dict[str, Any]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please authenticate before following."}
        if username_to_follow in self.following_list:
            return {"follow_status": False}
        self.following_list.append(username_to_follow)
        return {"follow_status": True}

    def list_all_following(self) -> dict[str, Any]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please authenticate before listing following."}
        return {"following_list": self.following_list}

    def unfollow_user(self, username_to_unfollow: str) -> dict[str, Any]:
        if not self.authenticated:
            return {"error": "User not authenticated. Please authenticate before unfollowing."}
        if username_to_unfollow not in self.following_list:
            return {"unfollow_status": False}
        self.following_list.remove(username_to_unfollow)
        return {"unfollow_status": True}

    def get_tweet(self, tweet_id: int) -> dict[str, Any]:
        if tweet_id not in self.tweets:
            return {"error": f"Tweet with ID {tweet_id} not found."}
        return self.tweets[tweet_id]

    def get_user_tweets(self, username: str) -> list[dict[str, Any]]:
        return [tweet for tweet in self.tweets.values() if tweet["username"] == username]

    def search_tweets(self, keyword: str) -> list[dict[str, Any]]:
        return [tweet for tweet in self.tweets.values()
                if keyword.lower() in tweet["content"].lower()
                or keyword.lower() in [tag.lower() for tag in tweet["tags"]]]

    def get_tweet_comments(self, tweet_id: int) -> Any:
        if tweet_id not in self.tweets:  # a dict here, a list below, as BFCL returns them
            return {"error": f"Tweet with ID {tweet_id} not found."}
        return self.comments.get(tweet_id, [])

    def get_user_stats(self, username: str) -> dict[str, int]:
        tweet_count = len([tweet for tweet in self.tweets.values() if tweet["username"] == username])
        following_count = len(self.following_list) if username == self.username else 0
        retweet_count = len(self.retweets.get(username, []))
        return {"tweet_count": tweet_count, "following_count": following_count, "retweet_count": retweet_count}

"""One comment per suite on a pull request, against a local server that answers as GitHub's REST API does."""

from __future__ import annotations

import pytest
from github_api import GITHUB_BODY_LIMIT, fake_github

from evalsi.ci.github import CommentError, PullRequest, marker, upsert_comment
from evalsi.errors import BadInputError

REPO = "acme/app"


async def test_the_comment_is_created_once_then_updated() -> None:
    with fake_github() as github:
        github.add(REPO, 5, "LGTM")
        pull = PullRequest(REPO, "5", github.token, api=github.url)
        mark = marker("qa")
        first = await upsert_comment(pull, f"{mark}\nfirst", mark)
        second = await upsert_comment(pull, f"{mark}\nsecond", mark)
        assert (first.action, second.action) == ("created", "updated")
        assert first.comment_id == second.comment_id
        bodies = [c["body"] for c in github.thread(REPO, 5)]
        assert bodies == ["LGTM", f"{mark}\nsecond"]  # not duplicated, the other comment untouched
        assert [c.method for c in github.calls] == ["GET", "POST", "GET", "PATCH"]
        assert all(c.authorization == f"Bearer {github.token}" for c in github.calls)


async def test_another_suites_comment_is_left_alone() -> None:
    with fake_github() as github:
        pull = PullRequest(REPO, "5", github.token, api=github.url)
        await upsert_comment(pull, f"{marker('qa')}\nqa", marker("qa"))
        await upsert_comment(pull, f"{marker('rag')}\nrag", marker("rag"))
        assert [c["body"] for c in github.thread(REPO, 5)] == [f"{marker('qa')}\nqa", f"{marker('rag')}\nrag"]


async def test_the_comment_is_found_past_the_first_page() -> None:
    with fake_github() as github:
        mark = marker("qa")
        for n in range(130):
            github.add(REPO, 9, f"comment {n}")
        existing = github.add(REPO, 9, f"{mark}\nold")
        pull = PullRequest(REPO, "9", github.token, api=github.url)
        posted = await upsert_comment(pull, f"{mark}\nnew", mark)
        assert posted.action == "updated" and posted.comment_id == existing["id"]
        assert [c.method for c in github.calls] == ["GET", "GET", "PATCH"]  # followed the Link header
        assert len(github.thread(REPO, 9)) == 131


async def test_a_next_page_on_another_origin_is_not_followed_with_the_token() -> None:
    with fake_github() as github, fake_github() as elsewhere:
        github.next_origin = elsewhere.url
        for n in range(101):
            github.add(REPO, 9, f"comment {n}")
        pull = PullRequest(REPO, "9", github.token, api=github.url)
        posted = await upsert_comment(pull, f"{marker('qa')}\nnew", marker("qa"))
        assert posted.action == "created"
        assert elsewhere.calls == []  # the token never went there


async def test_a_github_outage_is_a_comment_error_naming_the_call() -> None:
    with fake_github() as github:
        github.fail_with = 500
        pull = PullRequest(REPO, "5", github.token, api=github.url)
        with pytest.raises(CommentError, match=r"GET .*/repos/acme/app/issues/5/comments.*HTTP 500: Server Error"):
            await upsert_comment(pull, f"{marker('qa')}\nx", marker("qa"))


async def test_a_refused_token_says_what_github_said_and_never_shows_the_token() -> None:
    with fake_github() as github:
        pull = PullRequest(REPO, "5", "ghs_wrong_token", api=github.url)
        with pytest.raises(CommentError, match="HTTP 401: Bad credentials") as caught:
            await upsert_comment(pull, f"{marker('qa')}\nx", marker("qa"))
        assert "ghs_wrong_token" not in str(caught.value) and "ghs_wrong_token" not in repr(pull)


async def test_a_body_over_githubs_limit_is_what_github_refuses() -> None:
    # The limit the summary is cut to (evalsi.ci.summary) is GitHub's, as this server enforces it.
    with fake_github() as github:
        pull = PullRequest(REPO, "5", github.token, api=github.url)
        mark = marker("qa")
        with pytest.raises(CommentError, match="HTTP 422: Validation Failed"):
            await upsert_comment(pull, mark + "x" * GITHUB_BODY_LIMIT, mark)


async def test_an_unreachable_api_is_a_comment_error_within_the_timeout() -> None:
    pull = PullRequest(REPO, "5", "t", api="http://127.0.0.1:9")
    with pytest.raises(CommentError, match=r"ClientConnectorError|ClientConnectionError|Cannot connect"):
        await upsert_comment(pull, f"{marker('qa')}\nx", marker("qa"), timeout_s=5)


def test_the_token_goes_only_to_https_or_loopback() -> None:
    with pytest.raises(BadInputError, match=r"--github-api 'http://github.example.com'.*https://"):
        PullRequest(REPO, "5", "t", api="http://github.example.com")
    assert PullRequest(REPO, "5", "t", api="https://ghe.example.com/api/v3").api.startswith("https://")

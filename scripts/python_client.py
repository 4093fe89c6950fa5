"""Calls a running server through the client openapi-python-client generated from its document.

Run by scripts/python_client.sh, with the generated package on PYTHONPATH and the server's
address and an API key (read, write) in BROADSHEET_BASE and BROADSHEET_API_KEY. Each call
goes through the generated function and model, so a document that generates but does not
fit the server (a wrong type, a missing field, a schema the parser refuses) fails here. Any
unexpected status, any answer that is not the model it should be, and any exception exits
non-zero.
"""

import os
import sys

from broadsheet_api_client import AuthenticatedClient
from broadsheet_api_client.api.bounces import report_bounce
from broadsheet_api_client.api.issues import create_issue, get_issue, list_issues
from broadsheet_api_client.api.newsletter import get_newsletter, update_newsletter
from broadsheet_api_client.api.subscribers import (
    bulk_create_subscribers,
    create_subscriber,
    get_subscriber,
    list_subscribers,
)
from broadsheet_api_client.models import (
    ArticleBody,
    BounceReport,
    BounceResult,
    BulkBody,
    BulkResult,
    ErrorBody,
    IssueBody,
    IssueFields,
    IssueList,
    IssueObject,
    NewsletterEnvelope,
    NewsletterPatch,
    SubscriberFields,
    SubscriberList,
    SubscriberObject,
)

calls = 0


def expect(response, status, model):
    """The parsed answer of `response`, checked to be `status` and an instance of `model`."""
    global calls
    calls += 1
    body = response.content.decode("utf-8", "replace")
    if response.status_code != status or not isinstance(response.parsed, model):
        sys.exit(
            f"expected {status} {model.__name__}, got {response.status_code} "
            f"{type(response.parsed).__name__}: {body}"
        )
    return response.parsed


def check(condition, what):
    if not condition:
        sys.exit(f"not as expected: {what}")


def main():
    client = AuthenticatedClient(
        base_url=os.environ["BROADSHEET_BASE"] + "/api/v1",
        token=os.environ["BROADSHEET_API_KEY"],
        raise_on_unexpected_status=True,
    )
    with client as c:
        newsletter = expect(get_newsletter.sync_detailed(client=c), 200, NewsletterEnvelope)
        check(newsletter.data.name == "Client Check", f"the newsletter's name: {newsletter.data.name}")

        # The time zone is a string the server checks against the IANA database: a name
        # the generated enum used to refuse (GMT0, GMT+0, GMT-0 collided) is saved, an
        # unknown one is 422 naming the field.
        patched = expect(
            update_newsletter.sync_detailed(client=c, body=NewsletterPatch(time_zone="GMT+0")),
            200,
            NewsletterEnvelope,
        )
        check(patched.data.time_zone == "GMT+0", f"the saved zone: {patched.data.time_zone}")
        refused = expect(
            update_newsletter.sync_detailed(client=c, body=NewsletterPatch(time_zone="Mars/Olympus")),
            422,
            ErrorBody,
        )
        check(
            refused.error.code == "validation_error" and "time_zone" in refused.error.details.additional_properties,
            f"the refusal names time_zone: {refused.to_dict()}",
        )

        # Subscribers: one (its body is either of two shapes, so the client takes a dict),
        # then a bulk of 120, listed at the largest page the document states.
        one = expect(
            create_subscriber.sync_detailed(client=c, body={"email": "reader@example.com", "tags": ["python"]}),
            201,
            SubscriberObject,
        )
        shown = expect(get_subscriber.sync_detailed(one.id, client=c), 200, SubscriberObject)
        check(shown.email == "reader@example.com" and shown.tags == ["python"], f"the subscriber: {shown}")
        entries = [SubscriberFields(email=f"bulk{i:03}@example.com") for i in range(120)]
        bulk = expect(
            bulk_create_subscribers.sync_detailed(client=c, body=BulkBody(subscribers=entries)),
            200,
            BulkResult,
        )
        check(bulk.created == 120 and not bulk.errors, f"the bulk result: {bulk.to_dict()}")
        page = expect(list_subscribers.sync_detailed(client=c, per_page=100), 200, SubscriberList)
        check(
            page.meta.per_page == 100 and len(page.subscribers) == 100 and page.meta.has_more,
            f"the first page: {page.meta.to_dict()}, {len(page.subscribers)} subscribers",
        )
        rest = expect(
            list_subscribers.sync_detailed(client=c, per_page=100, cursor=page.meta.next_cursor),
            200,
            SubscriberList,
        )
        check(len(rest.subscribers) == 21 and not rest.meta.has_more, f"the second page: {rest.meta.to_dict()}")

        # An issue with an article, shown and listed.
        fields = IssueFields(
            subject="From Python",
            content_markdown="Written by a generated client.",
            articles=[ArticleBody(title="The tide tables", url="https://tides.example/")],
        )
        issue = expect(create_issue.sync_detailed(client=c, body=IssueBody(issue=fields)), 201, IssueObject)
        check(issue.subject == "From Python" and issue.status == "draft", f"the issue: {issue.to_dict()}")
        again = expect(get_issue.sync_detailed(issue.id, client=c), 200, IssueObject)
        check(again.articles_count == 1, f"the issue's articles: {again.to_dict()}")
        issues = expect(list_issues.sync_detailed(client=c), 200, IssueList)
        check([i.id for i in issues.issues] == [issue.id], f"the issues: {issues.to_dict()}")

        # A field the request does not know is refused by name, through the client's own
        # HTTP session (the generated models cannot send one: their objects are closed).
        typo = c.get_httpx_client().post("/issues", json={"issue": {"subjet": "Typo"}})
        check(
            typo.status_code == 422 and "issue.subjet" in typo.json()["error"]["details"],
            f"the typo's answer: {typo.status_code} {typo.text}",
        )

        bounced = expect(
            report_bounce.sync_detailed(
                client=c, body=BounceReport(email="reader@example.com", reason="550 5.1.1 user unknown")
            ),
            200,
            BounceResult,
        )
        check(bool(bounced.message), f"the bounce: {bounced.to_dict()}")
        after = expect(get_subscriber.sync_detailed(one.id, client=c), 200, SubscriberObject)
        check(after.status == "bounced", f"the bounced subscriber: {after.status}")
    print(f"python client: {calls} calls through the generated client answered as documented")


if __name__ == "__main__":
    main()

"""localstripe as the integration tests run it (tests/it/support/stripe.rs starts this file with
target/py/bin/python, one process per test).

localstripe 1.15.10 (pinned: what follows patches its internals) keeps Stripe's objects in
memory and signs webhooks as Stripe does. Started through its own command it would not do for
the tests as it is, so this launcher changes it here, and only here:

- It listens on 127.0.0.1, on a port the system picks (printed as `listening PORT` on stdout
  once bound), not on every interface at a port chosen beforehand. It stops when its standard
  input closes, so a test process that dies takes it along.
- It keeps nothing on disk: stock localstripe writes its whole store to the one file
  /tmp/localstripe.pickle after every change, which parallel tests would share.
- Webhooks go out one at a time, in the order the events were made, at once: stock localstripe
  waits a second before each and sends them side by side, in no order. `POST /_config/hold`
  with `{"hold": true}` keeps them queued until `{"hold": false}`. `GET /_config/deliveries`
  lists what was sent: `[{"id", "type", "attempts": [{"url", "status"} or {"url", "error"}]}]`.
  The `t=` of `Stripe-Signature` is the time of sending, as with Stripe (stock: the event's
  creation). There are no retries.
- `POST /_config/events` with `{"type", "object"}` makes an event of any type (stored, listed
  by GET /v1/events, sent like localstripe's own): the test support sends checkout.session.*
  this way, which localstripe does not know.
- Events Stripe sends and localstripe does not: `invoice.paid` (beside
  `invoice.payment_succeeded`), and `customer.subscription.updated` (with
  `data.previous_attributes`) after any API request that changed a subscription that existed
  before it and was not deleted by it.
- Trials: a subscription made with `trial_period_days` (or `trial_end`) is `trialing`, with
  `trial_start`, `trial_end`, and the trial as its current period (stock: it stays
  `incomplete`, with no trial dates). Setting `trial_end` to `now` (or a past time) ends the
  trial as Stripe does: the first period starts then (localstripe's `start_date` moves there,
  since it counts periods from it), and its invoice is made and paid.
- A declined charge when an invoice is paid (`POST /v1/invoices/ID/pay`, the first invoice of a
  subscription, the end of a trial) makes `invoice.payment_failed`, and a subscription that was
  active or trialing becomes `past_due` (stock: nothing happens, the invoice stays open).
- `cancel_at_period_end=true` sets `cancel_at` (the period's end) and `canceled_at` as Stripe
  does, and `false` clears them; a subscription's `metadata` can be updated; a deleted
  subscription has `canceled_at`.
- Events carry the `api_version` given as `--api-version` (stock: 2017-08-15).
"""

import argparse
import asyncio
import hashlib
import hmac
import json
import logging
import os
import socket
import sys
import threading
import time
from importlib.metadata import version

PINNED = '1.15.10'
if version('localstripe') != PINNED:
    sys.exit('tests/it/support/run_localstripe.py patches localstripe %s, but %s is installed: '
             'target/py/bin/pip install localstripe==%s'
             % (PINNED, version('localstripe'), PINNED))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

from localstripe import resources, server, webhooks  # noqa: E402
from localstripe.resources import (  # noqa: E402
    Event, Invoice, PaymentIntent, Customer, Subscription, store)

parser = argparse.ArgumentParser()
parser.add_argument('--api-version', default='2024-06-20')
args = parser.parse_args()

# Nothing on disk.
resources.Store.dump_to_disk = lambda self: None

# Events: the API version they claim.
_event_init = Event.__init__


def event_init(self, type, data):
    _event_init(self, type, data)
    self.api_version = args.api_version


Event.__init__ = event_init

# Webhooks: one ordered queue.
queue = []
sent = []
state = {'hold': False, 'wake': None}


def wake():
    if state['wake'] is not None:
        state['wake'].set()


def schedule(event):
    if event.type == 'customer.subscription.created':
        start_trial(event)
    if 'made' in state:
        state['made'].append(event)
    else:
        queue.append(event)
        wake()


# A new subscription's first invoice is paid inside its constructor, before localstripe makes
# customer.subscription.created: that event goes first, as with Stripe.
_subscription_init = Subscription.__init__


def subscription_init(self, *args, **kwargs):
    state['made'] = []
    try:
        _subscription_init(self, *args, **kwargs)
    finally:
        made = state.pop('made')
        created = [e for e in made if e.type == 'customer.subscription.created']
        queue.extend(created + [e for e in made if e not in created])
        wake()


Subscription.__init__ = subscription_init


resources.schedule_webhook = schedule
webhooks.schedule_webhook = schedule


async def deliver_forever(app):
    state['wake'] = asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            while state['hold'] or not queue:
                state['wake'].clear()
                await state['wake'].wait()
            event = queue.pop(0)
            payload = json.dumps(event._export(), indent=2,
                                 sort_keys=True).encode('utf-8')
            attempts = []
            for hook in list(webhooks._webhooks.values()):
                if hook.events is not None and event.type not in hook.events:
                    continue
                now = int(time.time())
                signature = hmac.new(hook.secret.encode('utf-8'),
                                     b'%d.%s' % (now, payload),
                                     hashlib.sha256).hexdigest()
                headers = {
                    'Content-Type': 'application/json; charset=utf-8',
                    'Stripe-Signature': 't=%d,v1=%s' % (now, signature)}
                try:
                    async with session.post(hook.url, data=payload,
                                            headers=headers) as r:
                        await r.read()
                        attempts.append({'url': hook.url, 'status': r.status})
                except Exception as e:  # refused, timed out: not retried
                    attempts.append({'url': hook.url, 'error': repr(e)})
            sent.append({'id': event.id, 'type': event.type,
                         'attempts': attempts})


async def start_delivery(app):
    app['delivery'] = asyncio.ensure_future(deliver_forever(app))


async def stop_delivery(app):
    app['delivery'].cancel()


# invoice.paid beside invoice.payment_succeeded.
_on_payment_success = Invoice._on_payment_success


def on_payment_success(self):
    self.status_transitions['paid_at'] = int(time.time())
    schedule(Event('invoice.paid', self))
    _on_payment_success(self)


Invoice._on_payment_success = on_payment_success


# A declined charge fails the invoice (stock: `on_failure_now=lambda: None`).
def api_pay_invoice(cls, id):
    obj = Invoice._api_retrieve(id)

    if obj.status == 'paid':
        raise resources.UserError(400, 'Invoice is already paid')
    elif obj.status not in ('draft', 'open'):
        raise resources.UserError(400, 'Bad request')

    obj._draft = False

    if obj.total <= 0:
        obj._on_payment_success()
    else:
        cus = Customer._api_retrieve(obj.customer)
        pm = cus._get_default_payment_method_or_source()
        if pm is None:
            raise resources.UserError(404, 'This customer has no payment method')
        pi = PaymentIntent(amount=obj.total, currency=obj.currency,
                           customer=obj.customer, payment_method=pm.id)
        obj.payment_intent = pi.id
        pi.invoice = obj.id
        pi._confirm(on_failure_now=obj._on_payment_failure_now)

    return obj


Invoice._api_pay_invoice = classmethod(api_pay_invoice)


# Trials.
def start_trial(event):
    sub = store.get('subscription:' + event.data['object']['id'])
    if (sub is None or sub.status != 'incomplete' or sub.latest_invoice
            or not (sub.trial_period_days or sub.trial_end)):
        return
    sub.trial_start = sub.start_date
    if sub.trial_end is None:
        sub.trial_end = sub.start_date + sub.trial_period_days * 86400
    sub.status = 'trialing'
    event.data = {'object': sub._export()}


_period_start = Subscription.current_period_start
_period_end = Subscription.current_period_end
Subscription.current_period_start = property(
    lambda s: s.trial_start if s.status == 'trialing'
    else _period_start.fget(s))
Subscription.current_period_end = property(
    lambda s: s.trial_end if s.status == 'trialing' else _period_end.fget(s))

_update = Subscription._update


def update(self, **data):
    was_trialing = self.status == 'trialing'
    metadata = data.get('metadata')
    try:
        _update(self, **data)
    except TypeError as e:  # a parameter localstripe does not know
        raise resources.UserError(400, 'Unexpected parameter: %s' % e)
    now = int(time.time())
    if isinstance(metadata, dict):
        self.metadata = dict(self.metadata or {}, **metadata)
    if 'cancel_at_period_end' in data:
        if self.cancel_at_period_end:
            self.cancel_at = self.current_period_end
            self.canceled_at = now
        else:
            self.cancel_at = None
            self.canceled_at = None
    if (was_trialing and self.trial_end is not None
            and self.trial_end <= now):
        self.start_date = now
        self.status = 'active'  # past_due if the invoice below fails
        if self.cancel_at_period_end:
            self.cancel_at = self.current_period_end
        self._create_invoice()


Subscription._update = update

_api_delete = Subscription._api_delete


def api_delete(cls, id):
    obj = Subscription._api_retrieve(id)
    obj.canceled_at = obj.canceled_at or int(time.time())
    return _api_delete(id)


Subscription._api_delete = classmethod(api_delete)


# The route of POST /v1/invoices/ID/pay holds the stock function: send it to the one above.
pay_invoice = server.api_extra(Invoice._api_pay_invoice, '/v1/invoices/{id}/pay')


@web.middleware
async def patched_routes(request, handler):
    if (request.method == 'POST' and request.path.startswith('/v1/invoices/')
            and request.path.endswith('/pay')
            and request.path.count('/') == 4):
        return await pay_invoice(request)
    return await handler(request)


# customer.subscription.updated
@web.middleware
async def announce_updates(request, handler):
    if (request.method not in ('POST', 'DELETE')
            or request.path.startswith('/_config/')):
        return await handler(request)
    before = {key: obj._export() for key, obj in store.items()
              if key.startswith('subscription:')}
    try:
        return await handler(request)
    finally:
        for key, old in before.items():
            obj = store.get(key)
            if obj is None or obj.status == 'canceled':
                continue
            new = obj._export()
            changed = {k: old.get(k) for k in new if new[k] != old.get(k)}
            if changed:
                event = Event('customer.subscription.updated', obj)
                event.data['previous_attributes'] = changed
                schedule(event)


server.app.middlewares.append(announce_updates)
server.app.middlewares.append(patched_routes)  # inside announce_updates


# /_config/ routes.
class Raw:
    def __init__(self, obj):
        self.obj = obj

    def _export(self, expand=None):
        return self.obj


async def make_event(request):
    data = await request.json()
    if not isinstance(data.get('type'), str) or \
            not isinstance(data.get('object'), dict):
        return web.json_response({'error': 'needs type and object'},
                                 status=400)
    event = Event(data['type'], Raw(data['object']))
    schedule(event)
    return web.json_response(event._export())


async def hold(request):
    data = await request.json()
    state['hold'] = bool(data.get('hold'))
    wake()
    return web.json_response({'hold': state['hold']})


async def deliveries(request):
    return web.json_response(sent)


server.app.router.add_post('/_config/events', make_event)
server.app.router.add_post('/_config/hold', hold)
server.app.router.add_get('/_config/deliveries', deliveries)
server.app.on_startup.append(start_delivery)
server.app.on_cleanup.append(stop_delivery)


def exit_when_stdin_closes():
    sys.stdin.buffer.read()
    os._exit(0)


threading.Thread(target=exit_when_stdin_closes, daemon=True).start()

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(('127.0.0.1', 0))
print('listening %d' % sock.getsockname()[1], flush=True)

logger = logging.getLogger('aiohttp.access')
logger.setLevel(logging.DEBUG)
logger.addHandler(logging.StreamHandler())
web.run_app(server.app, sock=sock, access_log=logger, print=None)

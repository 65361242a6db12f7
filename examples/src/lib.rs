//! The order-fulfilment workflow the README's first command runs.

use std::sync::atomic::{AtomicU32, Ordering};

use pgbus_runtime::prelude::*;

/// What the example's worker runs ([`Fulfil`] and [`NotifyVendor`], on the
/// queues their steps use), as the definitions document `pgbus deploy-check`
/// reads: what `order-fulfilment --print-definitions` writes, without a
/// database. The binary's worker registers the same workflows, so this equals
/// its `Worker::definitions()`.
#[must_use]
pub fn definitions() -> pgbus_runtime::deploy::Definitions {
    pgbus_runtime::deploy::Definitions::of([Fulfil::DEFINITION, NotifyVendor::DEFINITION])
}

/// One order to fulfil.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    /// The order's id.
    pub id: i64,
    /// What to charge, in cents.
    pub amount_cents: i64,
    /// Whether the customer asked for a gift wrap.
    pub gift_wrap: bool,
}

/// The payment gateway answered with a transient failure; worth another attempt.
#[derive(Debug, thiserror::Error)]
#[error("payment gateway unavailable (attempt {attempt})")]
pub struct GatewayUnavailable {
    /// The attempt that failed.
    pub attempt: u32,
}

/// What the payment processor sends when a charge has settled: the
/// `payment.settled` signal's payload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settlement {
    /// The processor's reference for the payment.
    pub reference: String,
}

/// The vendors told about every order.
pub const VENDORS: [&str; 2] = ["warehouse", "courier"];

/// A note to one vendor about one order: the input of a [`NotifyVendor`] run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VendorNotice {
    /// The order.
    pub order_id: i64,
    /// The vendor told.
    pub vendor: String,
}

/// Tells one vendor about an order; one child run per vendor of each order's
/// `notify_vendors` fan-out.
pub struct NotifyVendor;

#[workflow(name = "orders.notify_vendor", input = VendorNotice, queue = "orders")]
impl NotifyVendor {
    /// Sends the note (here: records what would be sent).
    #[step]
    async fn send(&self, cx: &mut StepCx<VendorNotice>) -> StepResult {
        let notice = cx.input().clone();
        cx.output(&format!(
            "order {} sent to {}",
            notice.order_id, notice.vendor
        ))?;
        Ok(Flow::Complete)
    }
}

/// Fulfils an order: reserve stock, charge (transient failures are reattempted),
/// wait for the payment processor's `payment.settled` signal (an hour at most,
/// then the order is cancelled), tell every vendor in a fan-out of child runs,
/// gift-wrap when asked, then ship using the reservation made earlier.
pub struct Fulfil {
    /// How many charge attempts fail before the gateway recovers, per run.
    pub gateway_failures: u32,
    charges: AtomicU32,
}

impl Fulfil {
    /// A workflow value whose gateway fails `gateway_failures` times per run first.
    #[must_use]
    pub const fn new(gateway_failures: u32) -> Self {
        Self {
            gateway_failures,
            charges: AtomicU32::new(0),
        }
    }

    /// How many times `charge` ran, across runs.
    #[must_use]
    pub fn charge_calls(&self) -> u32 {
        self.charges.load(Ordering::Relaxed)
    }
}

#[workflow(name = "orders.fulfil", input = Order, queue = "orders")]
impl Fulfil {
    /// Reserves stock and records the reservation for `ship`.
    #[step]
    async fn reserve_stock(&self, cx: &mut StepCx<Order>) -> StepResult {
        let reservation = format!("R-{}", cx.input().id);
        cx.output(&reservation)?;
        Ok(Flow::Complete)
    }

    /// Charges the card, a second after the reservation; the first attempts hit a
    /// flaky gateway and are reattempted half a second apart. Only an error that
    /// outlasts the reattempts is reported.
    #[step(
        wait = "1s",
        on_exception(
            matching(GatewayUnavailable),
            action = "reattempt",
            wait = "500ms",
            max_reattempts = 3,
            report = "terminal_only"
        )
    )]
    async fn charge(&self, cx: &mut StepCx<Order>) -> Result<(), GatewayUnavailable> {
        self.charges.fetch_add(1, Ordering::Relaxed);
        if cx.attempt() <= self.gateway_failures {
            return Err(GatewayUnavailable {
                attempt: cx.attempt(),
            });
        }
        Ok(())
    }

    /// Waits for the payment processor to settle the charge: the
    /// `payment.settled` signal, sent with `Client::signal` (before or after the
    /// step gets here). Without one within an hour the order is cancelled.
    #[step(
        wait_for = "payment.settled",
        wait_timeout = "1h",
        on_timeout = "cancel"
    )]
    async fn await_payment(&self, cx: &mut StepCx<Order>) -> StepResult {
        let settlement: Option<Settlement> = cx
            .signal()
            .map(pgbus_runtime::Signal::payload_as)
            .transpose()?;
        if let Some(settlement) = settlement {
            cx.output(&settlement.reference)?;
        }
        Ok(Flow::Complete)
    }

    /// Tells every vendor, one child run each; the step waits until all of
    /// them have finished. A cancelled one skips the step rather than hold the
    /// order.
    #[fan_out(on_batch_failure = "skip")]
    async fn notify_vendors(&self, cx: &mut StepCx<Order>, fan: &mut FanOut) -> StepResult {
        for vendor in VENDORS {
            fan.start::<NotifyVendor>(&VendorNotice {
                order_id: cx.input().id,
                vendor: vendor.to_owned(),
            })?;
        }
        Ok(Flow::Complete)
    }

    /// Wraps the parcel, unless the customer did not ask.
    #[step(skip_if = no_gift_wrap)]
    async fn gift_wrap(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    /// The `skip_if` guard of `gift_wrap`.
    fn no_gift_wrap(&self, cx: &StepCx<Order>) -> bool {
        !cx.input().gift_wrap
    }

    /// Ships against the reservation `reserve_stock` recorded.
    #[step]
    async fn ship(&self, cx: &mut StepCx<Order>) -> StepResult {
        let reservation: Option<String> = cx.output_of("reserve_stock")?;
        let Some(reservation) = reservation else {
            return Ok(Flow::pause("no stock reservation to ship against"));
        };
        cx.output(&format!("shipped against {reservation}"))?;
        Ok(Flow::Complete)
    }
}

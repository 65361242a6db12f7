//! The order-fulfilment workflow the README's first command runs.

use std::sync::atomic::{AtomicU32, Ordering};

use pgbus_runtime::prelude::*;

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

/// Fulfils an order: reserve stock, charge (transient failures are reattempted),
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

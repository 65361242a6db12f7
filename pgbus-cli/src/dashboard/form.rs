//! `CsrfForm`: how every POST route takes its form, its CSRF token checked
//! before any field is read.

use axum::extract::{Form, FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::{Csrf, pages, same};

/// A form posted from one of this dashboard's pages, as `T`: its `csrf`
/// field is this browser's token (the one the guard derived from the
/// browser's id cookie and put in the request), or the request is refused
/// with 403 before `T` is read. The guard has already refused a foreign
/// `Origin`. Every POST route takes its body through this, so no handler
/// can forget the check (the guard test walks them all).
#[derive(Debug)]
pub(crate) struct CsrfForm<T>(pub(crate) T);

impl<T, S> FromRequest<S> for CsrfForm<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let expected = request.extensions().get::<Csrf>().cloned();
        let Form(fields) = Form::<Vec<(String, String)>>::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let given = fields
            .iter()
            .find_map(|(name, value)| (name == "csrf").then_some(value.as_str()));
        let valid = match (given, expected) {
            (Some(given), Some(Csrf(expected))) => same(given, &expected),
            _ => false,
        };
        if !valid {
            return Err((
                StatusCode::FORBIDDEN,
                pages::plain_page(
                    "Refused",
                    "This form has expired or came from elsewhere; reload the page it came \
                     from and try again.",
                ),
            )
                .into_response());
        }
        // The fields again, as the handler's type: unknown ones (the token)
        // are ignored, missing or malformed ones answered as `Form` does.
        let text = serde_urlencoded::to_string(&fields).unwrap_or_default();
        serde_urlencoded::from_str(&text)
            .map(Self)
            .map_err(|error| {
                (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    pages::plain_page("Refused", &format!("This form is incomplete: {error}.")),
                )
                    .into_response()
            })
    }
}

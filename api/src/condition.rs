//! Conditions of every kind, read and written by one set of helpers: [`get`], [`set`],
//! [`remove`] and [`is_true`] over a kind's condition list.
//!
//! Upstream has one `Set…Condition` per kind and they differ in small ways: whether a new
//! message alone is a change, whether the transition time survives a change of reason, and
//! whether the replaced condition keeps its place. Each condition type says which through its
//! [`Condition::RULES`], so every caller of [`set`] gets its kind's upstream behaviour. The
//! Kruise kinds' condition types implement [`Condition`] beside the types (`apps::condition`);
//! Kubernetes' Pod and `metav1` conditions here.

use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as MetaCondition;
// Named by `impl_condition!` where it expands.
pub(crate) use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::keys::k8s;

/// How [`set`] treats a condition of the same type that is already in the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetRules {
    /// A new message alone is a change; otherwise equal status and reason leave the old
    /// condition as it is.
    pub message_matters: bool,
    /// With the status unchanged, the old condition's lastTransitionTime stays
    /// ([`Condition::keep_transition_of`]); otherwise the new condition's time is taken.
    pub keep_transition_time: bool,
    /// The replaced condition moves to the end of the list (upstream's filter-then-append);
    /// otherwise it takes the old one's place.
    pub move_to_end: bool,
}

impl SetRules {
    /// Upstream's usual `Set…Condition` (CloneSet, Advanced StatefulSet, and the kinds without
    /// a helper of their own): nothing changes when status, reason and message are the same;
    /// the transition time is kept while the status stays; the condition goes last.
    pub const UPSTREAM: SetRules = SetRules {
        message_matters: true,
        keep_transition_time: true,
        move_to_end: true,
    };
}

/// A condition as every kind has it: a type, a status, why, and when it last changed.
pub trait Condition {
    /// What `type` holds: a string, or an enum where the API has one.
    type Type: PartialEq + ?Sized;

    /// How [`set`] replaces a condition of this type.
    const RULES: SetRules = SetRules::UPSTREAM;

    /// The condition's `type`.
    fn type_(&self) -> &Self::Type;
    /// `True`, `False` or `Unknown`.
    fn status(&self) -> &str;
    /// The machine-readable reason; `None` only where the field is optional and unset.
    fn reason(&self) -> Option<&str>;
    /// The human-readable message; `None` where unset or where the type has none.
    fn message(&self) -> Option<&str>;
    /// When the status last changed.
    fn last_transition_time(&self) -> Option<&Time>;
    /// When the condition was last written, for the types that record it.
    fn last_update_time(&self) -> Option<&Time> {
        None
    }
    /// Takes from `old` what a condition keeps while its status does not change: its
    /// lastTransitionTime.
    fn keep_transition_of(&mut self, old: &Self);
}

/// The condition of `type_`, if the list has one.
pub fn get<'a, C: Condition>(conditions: &'a [C], type_: &C::Type) -> Option<&'a C> {
    conditions.iter().find(|c| c.type_() == type_)
}

/// Whether the condition of `type_` is there and True.
pub fn is_true<C: Condition>(conditions: &[C], type_: &C::Type) -> bool {
    get(conditions, type_).is_some_and(|c| c.status() == k8s::CONDITION_TRUE)
}

/// Drops every condition of `type_`.
pub fn remove<C: Condition>(conditions: &mut Vec<C>, type_: &C::Type) {
    conditions.retain(|c| c.type_() != type_);
}

/// Sets `new`, replacing the condition of its type by [`Condition::RULES`]; `false` when the
/// one already there says the same and nothing changed.
pub fn set<C: Condition>(conditions: &mut Vec<C>, mut new: C) -> bool {
    let rules = C::RULES;
    let Some(i) = conditions.iter().position(|c| c.type_() == new.type_()) else {
        conditions.push(new);
        return true;
    };
    let old = &conditions[i];
    let same_status = old.status() == new.status();
    if same_status
        && old.reason() == new.reason()
        && (!rules.message_matters || old.message() == new.message())
    {
        return false;
    }
    if same_status && rules.keep_transition_time {
        new.keep_transition_of(old);
    }
    if rules.move_to_end {
        conditions.retain(|c| c.type_() != new.type_());
        conditions.push(new);
    } else {
        conditions[i] = new;
    }
    true
}

/// A field that is required in some condition types and optional in others (`reason` and
/// `message` as `String` or `Option<String>`, `lastTransitionTime` as `Time` or `Option<Time>`).
pub(crate) trait Field<T> {
    fn field(&self) -> Option<&T>;
}

impl<T> Field<T> for T {
    fn field(&self) -> Option<&T> {
        Some(self)
    }
}

impl<T> Field<T> for Option<T> {
    fn field(&self) -> Option<&T> {
        self.as_ref()
    }
}

/// Implements [`Condition`] for a type with the fields `type_`, `status`, `reason`, `message`
/// (or `no_message`) and `last_transition_time`, and `last_update_time` when named.
macro_rules! impl_condition {
    ($ty:ty, $kind:ty, $rules:expr, no_message) => {
        $crate::condition::impl_condition!(@impl $ty, $kind, $rules, no_message);
    };
    ($ty:ty, $kind:ty, $rules:expr $(, $update:ident)?) => {
        $crate::condition::impl_condition!(@impl $ty, $kind, $rules, message $(, $update)?);
    };
    (@message $c:ident, message) => {
        $crate::condition::Field::<String>::field(&$c.message).map(String::as_str)
    };
    (@message $c:ident, no_message) => {
        None
    };
    (@impl $ty:ty, $kind:ty, $rules:expr, $message:ident $(, $update:ident)?) => {
        impl $crate::condition::Condition for $ty {
            type Type = $kind;
            const RULES: $crate::condition::SetRules = $rules;
            fn type_(&self) -> &$kind {
                &self.type_
            }
            fn status(&self) -> &str {
                &self.status
            }
            fn reason(&self) -> Option<&str> {
                $crate::condition::Field::<String>::field(&self.reason).map(String::as_str)
            }
            fn message(&self) -> Option<&str> {
                $crate::condition::impl_condition!(@message self, $message)
            }
            fn last_transition_time(&self) -> Option<&$crate::condition::Time> {
                let t = &self.last_transition_time;
                $crate::condition::Field::<$crate::condition::Time>::field(t)
            }
            $(fn last_update_time(&self) -> Option<&$crate::condition::Time> {
                $crate::condition::Field::<$crate::condition::Time>::field(&self.$update)
            })?
            fn keep_transition_of(&mut self, old: &Self) {
                self.last_transition_time = old.last_transition_time.clone();
            }
        }
    };
}
pub(crate) use impl_condition;

impl_condition!(MetaCondition, str, SetRules::UPSTREAM);

/// Kubernetes' Pod conditions, as [`crate::pod::set_condition`] writes them: in place, and with
/// the status unchanged only reason and message move (the probe time stays too).
impl Condition for PodCondition {
    type Type = str;
    const RULES: SetRules = SetRules {
        message_matters: true,
        keep_transition_time: true,
        move_to_end: false,
    };
    fn type_(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
    fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
    fn last_transition_time(&self) -> Option<&Time> {
        self.last_transition_time.as_ref()
    }
    fn keep_transition_of(&mut self, old: &Self) {
        self.last_transition_time = old.last_transition_time.clone();
        self.last_probe_time = old.last_probe_time.clone();
    }
}

#[cfg(test)]
mod tests;

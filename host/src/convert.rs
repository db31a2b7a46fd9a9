//! The contract's state and timer types (generated from WIT) as the state
//! backend's own ([`weir_state`]): the same shapes, moved field by field
//! without copying their bytes.

use crate::types as wit;

impl From<wit::StateKind> for weir_state::StateKind {
    fn from(k: wit::StateKind) -> Self {
        match k {
            wit::StateKind::Value => weir_state::StateKind::Value,
            wit::StateKind::List => weir_state::StateKind::List,
            wit::StateKind::Map => weir_state::StateKind::Map,
        }
    }
}

impl From<wit::StateKey> for weir_state::StateKey {
    fn from(k: wit::StateKey) -> Self {
        weir_state::StateKey {
            state: k.state,
            key: k.key,
        }
    }
}

impl From<wit::StateOp> for weir_state::StateOp {
    fn from(op: wit::StateOp) -> Self {
        use weir_state::StateOp as S;
        match op {
            wit::StateOp::PutValue(p) => S::PutValue {
                target: p.target.into(),
                value: p.value,
            },
            wit::StateOp::ReplaceList(l) => S::ReplaceList {
                target: l.target.into(),
                values: l.values,
            },
            wit::StateOp::AppendList(l) => S::AppendList {
                target: l.target.into(),
                values: l.values,
            },
            wit::StateOp::PutEntry(p) => S::PutEntry {
                target: p.target.into(),
                map_key: p.map_key,
                value: p.value,
            },
            wit::StateOp::RemoveEntry(r) => S::RemoveEntry {
                target: r.target.into(),
                map_key: r.map_key,
            },
            wit::StateOp::Clear(k) => S::Clear(k.into()),
        }
    }
}

impl From<wit::TimeDomain> for weir_state::TimeDomain {
    fn from(d: wit::TimeDomain) -> Self {
        match d {
            wit::TimeDomain::EventTime => weir_state::TimeDomain::EventTime,
            wit::TimeDomain::ProcessingTime => weir_state::TimeDomain::ProcessingTime,
        }
    }
}

impl From<weir_state::TimeDomain> for wit::TimeDomain {
    fn from(d: weir_state::TimeDomain) -> Self {
        match d {
            weir_state::TimeDomain::EventTime => wit::TimeDomain::EventTime,
            weir_state::TimeDomain::ProcessingTime => wit::TimeDomain::ProcessingTime,
        }
    }
}

impl From<wit::Timer> for weir_state::Timer {
    fn from(t: wit::Timer) -> Self {
        weir_state::Timer {
            key: t.key,
            time: t.time,
            domain: t.domain.into(),
        }
    }
}

impl From<weir_state::Timer> for wit::Timer {
    fn from(t: weir_state::Timer) -> Self {
        wit::Timer {
            key: t.key,
            time: t.time,
            domain: t.domain.into(),
        }
    }
}

impl From<wit::TimerOp> for weir_state::TimerOp {
    fn from(op: wit::TimerOp) -> Self {
        match op {
            wit::TimerOp::Register(t) => weir_state::TimerOp::Register(t.into()),
            wit::TimerOp::Delete(t) => weir_state::TimerOp::Delete(t.into()),
        }
    }
}

//! A type compiled for its readers and writers: every record's slot
//! offsets, every field's JSON key, computed once per stream.

use super::{VAR_SLOT, bitmap_len, slot_width};
use crate::ty::Type;

/// A fixed-width type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// 1 byte, 0 or 1.
    Bool,
    /// 1 byte.
    I8,
    /// 2 bytes.
    I16,
    /// 4 bytes.
    I32,
    /// 8 bytes.
    I64,
    /// 1 byte.
    U8,
    /// 2 bytes.
    U16,
    /// 4 bytes.
    U32,
    /// 8 bytes.
    U64,
    /// 4 bytes.
    F32,
    /// 8 bytes.
    F64,
}

impl Scalar {
    /// Its slot's bytes.
    pub const fn width(self) -> usize {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    /// The smallest and largest value of an integer type; `None` for
    /// another.
    pub fn integer_range(self) -> Option<(i128, i128)> {
        Some(match self {
            Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
            Scalar::I16 => (i16::MIN.into(), i16::MAX.into()),
            Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
            Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
            Scalar::U8 => (0, u8::MAX.into()),
            Scalar::U16 => (0, u16::MAX.into()),
            Scalar::U32 => (0, u32::MAX.into()),
            Scalar::U64 => (0, u64::MAX.into()),
            Scalar::Bool | Scalar::F32 | Scalar::F64 => return None,
        })
    }
}

/// A type, compiled.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// A fixed-width value.
    Scalar(Scalar),
    /// UTF-8 text.
    String,
    /// Bytes.
    Bytes,
    /// JSON text.
    Json,
    /// A value or null.
    Optional(Box<Node>),
    /// A list of elements of one type, each in a slot of `width` bytes.
    List {
        /// The elements' type.
        element: Box<Node>,
        /// Their slot width.
        width: usize,
    },
    /// A row.
    Record {
        /// Its fields, in order.
        fields: Vec<FieldNode>,
        /// Bytes of its null bitmap.
        bitmap: usize,
        /// Bytes of bitmap and slots: where its variable part starts.
        fixed: usize,
    },
}

/// One field of a compiled record.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldNode {
    /// Its name.
    pub name: String,
    /// `"name":` as JSON, written before its value.
    pub json_key: Vec<u8>,
    /// Its type.
    pub node: Node,
    /// Its slot's offset in the row.
    pub offset: usize,
    /// Whether it may be null.
    pub optional: bool,
}

impl Node {
    /// `ty`, compiled.
    pub fn of(ty: &Type) -> Node {
        match ty {
            Type::Bool => Node::Scalar(Scalar::Bool),
            Type::I8 => Node::Scalar(Scalar::I8),
            Type::I16 => Node::Scalar(Scalar::I16),
            Type::I32 => Node::Scalar(Scalar::I32),
            Type::I64 => Node::Scalar(Scalar::I64),
            Type::U8 => Node::Scalar(Scalar::U8),
            Type::U16 => Node::Scalar(Scalar::U16),
            Type::U32 => Node::Scalar(Scalar::U32),
            Type::U64 => Node::Scalar(Scalar::U64),
            Type::F32 => Node::Scalar(Scalar::F32),
            Type::F64 => Node::Scalar(Scalar::F64),
            Type::String => Node::String,
            Type::Bytes => Node::Bytes,
            Type::Json => Node::Json,
            Type::Optional(t) => Node::Optional(Box::new(Node::of(t))),
            Type::List(t) => Node::List {
                element: Box::new(Node::of(t)),
                width: slot_width(t),
            },
            Type::Record(r) => {
                let bitmap = bitmap_len(r.fields.len());
                let mut offset = bitmap;
                let fields = r
                    .fields
                    .iter()
                    .map(|f| {
                        let mut json_key = serde_json::to_vec(&f.name).expect("a string");
                        json_key.push(b':');
                        let node = FieldNode {
                            name: f.name.clone(),
                            json_key,
                            node: Node::of(&f.ty),
                            offset,
                            optional: f.ty.is_optional(),
                        };
                        offset += slot_width(&f.ty);
                        node
                    })
                    .collect();
                Node::Record {
                    fields,
                    bitmap,
                    fixed: offset,
                }
            }
        }
    }

    /// Its slot's width in a row or a list.
    pub fn width(&self) -> usize {
        match self {
            Node::Scalar(s) => s.width(),
            Node::Optional(n) => n.width(),
            _ => VAR_SLOT,
        }
    }
}

/// A stream's type, compiled once for the host's readers and writers of
/// its rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// The type.
    pub ty: Type,
    /// Its compiled form.
    pub node: Node,
}

impl Schema {
    /// `ty`, compiled.
    pub fn new(ty: Type) -> Schema {
        let node = Node::of(&ty);
        Schema { ty, node }
    }

    /// The field a JSON pointer (`/a/b`) names: its compiled type and the
    /// path of slots to it (each a field's index and node), or `None` when
    /// no field is there.
    pub fn pointer(&self, pointer: &str) -> Option<Vec<(usize, &FieldNode)>> {
        let mut path = Vec::new();
        let mut node = &self.node;
        for part in pointer.strip_prefix('/')?.split('/') {
            let name = part.replace("~1", "/").replace("~0", "~");
            if let Node::Optional(inner) = node {
                node = inner;
            }
            let Node::Record { fields, .. } = node else {
                return None;
            };
            let (i, f) = fields.iter().enumerate().find(|(_, f)| f.name == name)?;
            path.push((i, f));
            node = &f.node;
        }
        Some(path)
    }
}

//! `#[derive(weir::Row)]`: a struct with named fields as a record type of
//! Weir's row format. Use it through the SDK (`weir::Row`), which documents
//! it.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Tokens;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, LitStr, parse_macro_input, spanned::Spanned};

/// Derive `weir::Row` for a struct with named fields: its type is a
/// record of its fields, in order, named as serde names them
/// (`#[serde(rename)]` and `#[serde(rename_all)]` are followed).
///
/// It also defines the struct's view, `NameView<'a>` (beside the struct,
/// with its visibility): one accessor per field, reading the field in place
/// in a row. `#[weir(view = "Other")]` names it otherwise, and
/// `#[weir(view = false)]` defines none (the struct's `Ref` is then the
/// struct itself, decoded), as for a struct with generic parameters.
#[proc_macro_derive(Row, attributes(serde, weir))]
pub fn derive_row(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// serde attributes that change a struct's shape, or how it is read, which
/// rows cannot follow: a typed record reads the same whatever its codec.
const UNSUPPORTED: &[&str] = &[
    "flatten",
    "skip",
    "skip_serializing",
    "skip_deserializing",
    "skip_serializing_if",
    "with",
    "serialize_with",
    "deserialize_with",
    "tag",
    "untagged",
    "content",
    "transparent",
    "getter",
    "remote",
    "from",
    "try_from",
    "into",
    "default",
    "alias",
    "deny_unknown_fields",
];

/// The `rename` and `rename_all` of `#[serde(...)]` attributes; an error
/// for one that changes the shape.
fn serde_names(attrs: &[syn::Attribute]) -> syn::Result<(Option<String>, Option<String>)> {
    let (mut rename, mut rename_all) = (None, None);
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            let name = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            if name == "rename" || name == "rename_all" {
                // `rename = "x"`, or `rename(serialize = "x", ...)`.
                let text = if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse::<LitStr>()?.value()
                } else {
                    // `rename(serialize = "a", deserialize = "b")`: one name
                    // for both, as a row has one.
                    let mut names = Vec::new();
                    meta.parse_nested_meta(|inner| {
                        names.push(inner.value()?.parse::<LitStr>()?.value());
                        Ok(())
                    })?;
                    match names.as_slice() {
                        [one] => one.clone(),
                        [a, b] if a == b => a.clone(),
                        _ => {
                            return Err(meta.error(
                                "weir::Row needs one name for a field: serialize and deserialize the same",
                            ));
                        }
                    }
                };
                if name == "rename" {
                    rename = Some(text);
                } else {
                    rename_all = Some(text);
                }
                return Ok(());
            }
            if UNSUPPORTED.contains(&name.as_str()) {
                return Err(meta.error(format!(
                    "weir::Row cannot follow #[serde({name})]: a row has every field, in order"
                )));
            }
            // Anything else (`default`, `alias`, `deny_unknown_fields`, ...)
            // does not change what a row holds: skip its value.
            if meta.input.peek(syn::Token![=]) {
                meta.value()?.parse::<syn::Expr>()?;
            } else if meta.input.peek(syn::token::Paren) {
                meta.parse_nested_meta(|inner| {
                    if inner.input.peek(syn::Token![=]) {
                        inner.value()?.parse::<syn::Expr>()?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
    }
    Ok((rename, rename_all))
}

/// The view's name from `#[weir(view = "Name")]` (`None` for
/// `view = false`), or `default`.
fn view_name(attrs: &[syn::Attribute], default: syn::Ident) -> syn::Result<Option<syn::Ident>> {
    let mut name = Some(default);
    for attr in attrs.iter().filter(|a| a.path().is_ident("weir")) {
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("view") {
                return Err(meta.error(
                    "weir::Row knows `#[weir(view = \"Name\")]` and `#[weir(view = false)]`",
                ));
            }
            let value = meta.value()?;
            if value.peek(syn::LitBool) {
                if value.parse::<syn::LitBool>()?.value {
                    return Ok(());
                }
                name = None;
            } else {
                let lit = value.parse::<LitStr>()?;
                name = Some(lit.parse::<syn::Ident>()?);
            }
            Ok(())
        })?;
    }
    Ok(name)
}

/// A Rust field name as serde's `rename_all` says (serde's own rules for
/// fields, which it takes to be snake_case).
fn renamed(field: &str, rule: &str, span: proc_macro2::Span) -> syn::Result<String> {
    let pascal = || {
        let mut out = String::new();
        let mut capitalize = true;
        for ch in field.chars() {
            if ch == '_' {
                capitalize = true;
            } else if capitalize {
                out.push(ch.to_ascii_uppercase());
                capitalize = false;
            } else {
                out.push(ch);
            }
        }
        out
    };
    Ok(match rule {
        "lowercase" | "snake_case" => field.to_owned(),
        "UPPERCASE" | "SCREAMING_SNAKE_CASE" => field.to_ascii_uppercase(),
        "kebab-case" => field.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => field.to_ascii_uppercase().replace('_', "-"),
        "PascalCase" => pascal(),
        "camelCase" => {
            let p = pascal();
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
                .unwrap_or_default()
        }
        other => {
            return Err(syn::Error::new(
                span,
                format!("weir::Row does not know the rename_all rule {other:?}"),
            ));
        }
    })
}

fn expand(input: &DeriveInput) -> syn::Result<Tokens> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            input.ident.span(),
            "weir::Row is for structs with named fields (a record type)",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new(
            data.fields.span(),
            "weir::Row is for structs with named fields (a record type)",
        ));
    };
    let (_, rename_all) = serde_names(&input.attrs)?;
    let mut idents = Vec::new();
    let mut types = Vec::new();
    let mut names = Vec::new();
    for f in &named.named {
        let ident = f.ident.clone().expect("a named field");
        let (rename, _) = serde_names(&f.attrs)?;
        let rust = ident.to_string();
        let rust = rust.strip_prefix("r#").unwrap_or(&rust).to_owned();
        let name = match (rename, &rename_all) {
            (Some(r), _) => r,
            (None, Some(rule)) => renamed(&rust, rule, ident.span())?,
            (None, None) => rust,
        };
        if names.contains(&name) {
            return Err(syn::Error::new(
                ident.span(),
                format!("two fields are named `{name}`"),
            ));
        }
        idents.push(ident);
        types.push(f.ty.clone());
        names.push(name);
    }
    let n = idents.len();
    let offs: Vec<_> = (0..n).map(|i| format_ident!("off_{}", i)).collect();
    let indexes: Vec<usize> = (0..n).collect();
    let types_path = quote!(::weir::__private::types);
    // Slot offsets: the bitmap, then each field's slot after the one
    // before (constants the optimizer folds).
    let mut lets = vec![quote! { let off_0: usize = #types_path::row::bitmap_len(#n); }];
    for i in 1..n {
        let (prev, this, ty) = (&offs[i - 1], &offs[i], &types[i - 1]);
        lets.push(quote! { let #this: usize = #prev + <#ty as ::weir::Row>::WIDTH; });
    }
    let fixed = match n {
        0 => quote!(#types_path::row::bitmap_len(0)),
        _ => {
            let (last, ty) = (&offs[n - 1], &types[n - 1]);
            quote!(#last + <#ty as ::weir::Row>::WIDTH)
        }
    };
    // A row shorter than its fixed part (bitmap and slots) is an error
    // before any field is read; the slots' offsets are in scope after it.
    let check_fixed = quote! {
        #(#lets)*
        let fixed: usize = #fixed;
        if bytes.len() < fixed {
            return ::std::result::Result::Err(#types_path::row::RowError(::std::format!(
                "a row of {} bytes, shorter than its {} bytes of slots",
                bytes.len(),
                fixed
            )));
        }
    };
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    // A view type reads the row in place; a generic struct has none (its
    // `Ref` is the struct, decoded), nor one whose view is turned off.
    let view = match input.generics.params.is_empty() {
        true => view_name(&input.attrs, format_ident!("{}View", name))?,
        false => None,
    };
    let (view_ref, view_read, view_item) = if let Some(view) = view {
        let vis = &input.vis;
        let accessors: Vec<Tokens> = named
            .named
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let (vis, ident, ty, off, lets) =
                    (&f.vis, &idents[i], &types[i], &offs[i], &lets[..=i]);
                let doc = format!("`{ident}` (field `{}` of the row), read in place.", names[i]);
                let what = format!("{name}.{ident}");
                quote! {
                    #[doc = #doc]
                    #[inline]
                    #[track_caller]
                    #[allow(dead_code)]
                    #vis fn #ident(&self) -> <#ty as ::weir::Row>::Ref<'a> {
                        #(#lets)*
                        match <#ty as ::weir::Row>::read_ref(self.row, 0, #i, #off) {
                            ::std::result::Result::Ok(v) => v,
                            ::std::result::Result::Err(e) => #types_path::value::malformed(#what, e),
                        }
                    }
                }
            })
            .collect();
        let view_doc = format!(
            "A row of [`{name}`] read in place: each accessor reads its field \
             where it lies (a number: one load; a string: a `&str` into the \
             row; a list: a `ListView`), nothing is copied (a `json` field is \
             parsed when read).\n\n\
             An accessor panics when the row is malformed, which no writer of \
             Weir's makes: the operator fails, its log naming the field."
        );
        let debug_fields = idents.iter().map(|i| {
            let text = i.to_string();
            quote!(.field(#text, &self.#i()))
        });
        let name_text = view.to_string();
        let item = quote! {
            #[doc = #view_doc]
            #[derive(::core::clone::Clone, ::core::marker::Copy)]
            #vis struct #view<'a> {
                row: &'a [u8],
            }

            #[automatically_derived]
            impl<'a> #view<'a> {
                #(#accessors)*
            }

            #[automatically_derived]
            impl<'a> ::core::fmt::Debug for #view<'a>
            where
                #(<#types as ::weir::Row>::Ref<'a>: ::core::fmt::Debug,)*
            {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.debug_struct(#name_text)#(#debug_fields)*.finish()
                }
            }

            #[automatically_derived]
            impl<'a> #types_path::value::RowView for #view<'a> {
                type Of = #name;

                fn row(&self) -> &[u8] {
                    self.row
                }
            }
        };
        let read = quote! {{
            #check_fixed
            ::std::result::Result::Ok(#view { row: bytes })
        }};
        (quote!(#view<'a>), read, item)
    } else {
        (
            quote!(Self),
            quote!(<Self as ::weir::Row>::decode(bytes)),
            quote!(),
        )
    };
    Ok(quote! {
        #view_item

        #[automatically_derived]
        impl #impl_generics ::weir::Row for #name #ty_generics #where_clause {
            const WIDTH: usize = #types_path::row::VAR_SLOT;

            fn row_type() -> ::weir::Type {
                ::weir::Type::Record(#types_path::Record {
                    fields: ::std::vec![
                        #(#types_path::Field::new(#names, <#types as ::weir::Row>::row_type()),)*
                    ],
                })
            }

            #[inline]
            fn read_slot(
                base: &[u8],
                _nulls_at: usize,
                _index: usize,
                off: usize,
            ) -> ::std::result::Result<Self, #types_path::row::RowError> {
                <Self as ::weir::Row>::decode(#types_path::row::var(base, off)?)
            }

            #[inline]
            fn write_slot(
                &self,
                buf: &mut ::std::vec::Vec<u8>,
                start: usize,
                _nulls_at: usize,
                _index: usize,
                off: usize,
            ) {
                let payload = buf.len();
                <Self as ::weir::Row>::encode(self, buf);
                #types_path::row::patch_var(buf, start, off, payload);
            }

            #[inline(always)]
            fn encode(&self, out: &mut ::std::vec::Vec<u8>) {
                #(#lets)*
                let start = out.len();
                out.resize(start + #fixed, 0);
                #(<#types as ::weir::Row>::write_slot(&self.#idents, out, start, 0, #indexes, #offs);)*
            }

            #[inline(always)]
            fn decode(bytes: &[u8]) -> ::std::result::Result<Self, #types_path::row::RowError> {
                #check_fixed
                ::std::result::Result::Ok(Self {
                    #(#idents: <#types as ::weir::Row>::read_slot(bytes, 0, #indexes, #offs)?,)*
                })
            }

            type Ref<'a> = #view_ref;

            #[inline]
            fn read_ref(
                base: &[u8],
                _nulls_at: usize,
                _index: usize,
                off: usize,
            ) -> ::std::result::Result<Self::Ref<'_>, #types_path::row::RowError> {
                <Self as ::weir::Row>::view(#types_path::row::var(base, off)?)
            }

            #[inline]
            #[allow(unused_variables)]
            fn view(bytes: &[u8]) -> ::std::result::Result<Self::Ref<'_>, #types_path::row::RowError> {
                #view_read
            }
        }
    })
}

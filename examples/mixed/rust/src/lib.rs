//! The Rust part of the mixed example: orders in, one record per item out.

use serde::{Deserialize, Serialize};

/// An order as the shop writes it.
#[derive(Deserialize)]
pub struct Order {
    /// Who ordered.
    pub user: String,
    /// What they ordered.
    pub items: Vec<Item>,
}

/// One line of an order.
#[derive(Deserialize)]
pub struct Item {
    /// The product.
    pub sku: String,
    /// Price of one, in cents.
    pub price: u64,
    /// How many.
    pub qty: u64,
}

/// One item of an order, with what it costs.
#[derive(Serialize)]
pub struct Purchase {
    /// Who bought it.
    pub user: String,
    /// The product.
    pub sku: String,
    /// Price times quantity, in cents.
    pub amount: u64,
}

/// Splits an order into its purchases.
pub fn explode(order: Order, out: &mut weir::Collector<Purchase>) {
    for item in order.items {
        out.emit(Purchase {
            user: order.user.clone(),
            sku: item.sku,
            amount: item.price * item.qty,
        });
    }
}

weir::export_operators! {
    flat_map "explode-items" => explode;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    #[test]
    fn an_order_becomes_one_purchase_per_item() {
        let mut h = Harness::flat_map(explode);
        let order = serde_json::json!({"user": "ann", "items": [
            {"sku": "tea", "price": 450, "qty": 2}, {"sku": "cup", "price": 1200, "qty": 1}
        ]});
        let out: Vec<serde_json::Value> = h.process(&(), &order, None).unwrap();
        assert_eq!(
            out,
            [
                serde_json::json!({"user": "ann", "sku": "tea", "amount": 900}),
                serde_json::json!({"user": "ann", "sku": "cup", "amount": 1200}),
            ]
        );
    }
}

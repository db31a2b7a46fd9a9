"""The Python part of the mixed example: a running total per user."""

import weir


@weir.keyed_process("running-total")
class RunningTotal(weir.KeyedProcess):
    """Per user: purchases so far and what they spent, emitted with each
    purchase."""

    def open(self, ctx):
        self.totals = ctx.value_state("totals")

    def process(self, purchase, ctx):
        spent, purchases = self.totals.value() or (0, 0)
        spent += purchase["amount"]
        purchases += 1
        self.totals.update([spent, purchases])
        yield {"user": purchase["user"], "spent": spent, "purchases": purchases,
               "last": purchase["sku"]}

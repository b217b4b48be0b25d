from decimal import Decimal, getcontext, localcontext, ROUND_HALF_UP, InvalidOperation
print(Decimal("0.1") + Decimal("0.2"), Decimal(0.1), Decimal("1.10") * 3, Decimal("10") / Decimal("3"))
print(Decimal("2.675").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP), Decimal("1E+3").normalize(), Decimal("-0"), Decimal("NaN"))
with localcontext() as ctx:
    ctx.prec = 50
    print(Decimal(2).sqrt())
print(getcontext().prec, Decimal("3.14159").as_tuple(), Decimal("1.5").to_integral_value(), round(Decimal("2.5")))
try: Decimal("abc")
except InvalidOperation as e: print(type(e).__name__, e)
try: Decimal(1) / 0
except Exception as e: print(type(e).__name__, e)

import statistics as st
data = [2.5, 3.25, 5.5, 11.25, 11.75]
print(st.mean(data), st.median(data), st.median_low([1, 3, 5, 7]), st.mode([1, 1, 2]), st.multimode("aabbc"))
print(st.pstdev([1, 2, 3, 4]), st.stdev([1, 2, 3, 4]), st.variance([1, 2, 3, 4]), st.quantiles(range(1, 11), n=4))
print(st.fmean([1, 2, 3]), st.geometric_mean([1, 4]), st.harmonic_mean([1, 4]), st.correlation([1, 2, 3], [2, 4, 7]))
from fractions import Fraction
print(st.mean([Fraction(1, 2), Fraction(1, 3)]), st.linear_regression([1, 2, 3], [2, 4, 6]))
try: st.mean([])
except st.StatisticsError as e: print(e)

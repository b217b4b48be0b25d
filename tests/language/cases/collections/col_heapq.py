import heapq
h = [5, 1, 8, 3, 2]; heapq.heapify(h); print(h)
heapq.heappush(h, 0); print([heapq.heappop(h) for _ in range(3)], h)
print(heapq.nlargest(2, [4, 9, 1, 7]), heapq.nsmallest(2, ["bb", "a", "ccc"], key=len))
print(list(heapq.merge([1, 4, 7], [2, 5], [0, 9])), heapq.heappushpop([1, 5], 3), heapq.heapreplace([1, 5], 3))

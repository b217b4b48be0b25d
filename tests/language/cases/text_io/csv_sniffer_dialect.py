import csv
print(csv.Sniffer().sniff("a|b|c\n1|2|3\n").delimiter, csv.list_dialects() and sorted(csv.list_dialects()))
print(list(csv.reader(['a,"b,c",d', "'x', y"], skipinitialspace=True)))

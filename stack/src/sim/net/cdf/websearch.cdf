# WebSearch flow sizes: flow size in bytes, then the percentage of flows no larger.
# Source: the web-search workload measured by Alizadeh et al., "Data Center TCP (DCTCP)",
# SIGCOMM 2010, Figure 4, as tabulated by the HPCC authors for their ns-3 experiments
# (github.com/alibaba-edu/High-Precision-Congestion-Control, traffic_gen/WebSearch_distribution.txt)
# and used in the HPCC paper's Figure 11. Sizes between points are linearly interpolated.
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100

# Hadoop flow sizes: flow size in bytes, then the percentage of flows no larger.
# Source: Facebook's Hadoop cluster as measured by Roy et al., "Inside the Social Network's
# (Datacenter) Network", SIGCOMM 2015, as tabulated by the HPCC authors for their ns-3
# experiments (github.com/alibaba-edu/High-Precision-Congestion-Control,
# traffic_gen/FbHdp_distribution.txt) and used in the HPCC paper. Sizes between points are
# linearly interpolated.
0 0
100 1
200 2
300 5
350 15
400 20
500 30
600 40
700 50
1000 60
2000 67
7000 70
30000 72
50000 82
80000 87
120000 90
300000 95
1000000 97.5
2000000 99
10000000 100

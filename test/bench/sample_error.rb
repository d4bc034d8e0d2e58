# frozen_string_literal: true
#
# sample_error.rb: how near `--top objects --sample N` comes to the true counts. It replays the
# agent's draw (ext/tracer_agent/top.c, next_gap: xorshift64, gaps uniform in 1..2N-1, the
# allocation drawn counts for its gap) over SITES sites that allocate in turn, the pattern a
# fixed gap would alias with, and prints the error of each site's estimate over RUNS seeds.
#
#   ruby test/bench/sample_error.rb [N [ALLOCATIONS_PER_SITE...]]
N = Integer(ARGV[0] || 16)
COUNTS = (ARGV.size > 1 ? ARGV[1..] : %w[1000 10000]).map { |a| Integer(a) }
SITES = 4
RUNS = 200
MASK = (1 << 64) - 1

def estimates(per_site, seed)
  x = seed | 1
  gap = lambda do
    x ^= (x << 13) & MASK
    x ^= x >> 7
    x ^= (x << 17) & MASK
    1 + (x % ((2 * N) - 1))
  end
  est = Array.new(SITES, 0)
  countdown = weight = gap.call
  (per_site * SITES).times do |i|
    countdown -= 1
    next if countdown.positive?

    est[i % SITES] += weight
    countdown = weight = gap.call
  end
  est
end

COUNTS.each do |k|
  errors = (1..RUNS).flat_map { |s| estimates(k, (s * 7919) + 12_345).map { |e| (e - k).abs.fdiv(k) } }.sort
  pct = ->(q) { 100 * errors[[(errors.size * q).floor, errors.size - 1].min] }
  puts format('--sample %d, %d allocations per site: error median %.1f%%, 95th percentile %.1f%%, max %.1f%% (%d estimates)',
              N, k, pct.call(0.5), pct.call(0.95), 100 * errors.last, errors.size)
end

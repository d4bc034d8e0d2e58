# shop.rb: a small app for `make demo`: it prices orders in a loop, forever.
$stdout.sync = STDOUT.sync = true # both: in a Ruby::Box (4.0) Kernel#puts writes to STDOUT, not $stdout

class Order
  attr_reader :items

  def initialize(items) = @items = items

  def total
    items.sum { |name, qty| Catalog.price(name) * qty }
  end
end

module Catalog
  PRICES = { 'apple' => 3, 'pear' => 4, 'fig' => 9 }.freeze

  def self.price(name)
    PRICES.fetch(name) { raise KeyError, "unknown item #{name}" }
  end
end

puts "shop #{Process.pid} ready"
loop do
  Order.new([['apple', 2], ['fig', 1]]).total
  begin
    Order.new([['kiwi', 1]]).total
  rescue KeyError
    nil
  end
  sleep 0.2
end

# app.rb: a small ActiveRecord app over SQLite, for `tracer -c activerecord`. It knows nothing
# of tracer: `tracer -c activerecord -x ruby examples/activerecord/app.rb` preloads the agent.
#
#   ruby app.rb [ROUNDS] [DATABASE]   ROUNDS of orders (default 1; 0: forever, 0.2 s apart),
#                                     in DATABASE (default: in memory)
require 'active_record'

ActiveRecord::Base.establish_connection(adapter: 'sqlite3', database: ARGV.fetch(1, ':memory:'))
ActiveRecord::Schema.verbose = false
ActiveRecord::Schema.define do
  create_table :products, if_not_exists: true do |t|
    t.string :name, null: false
    t.integer :price_cents, null: false
  end
  create_table :orders, if_not_exists: true do |t|
    t.string :customer, null: false
  end
  create_table :line_items, if_not_exists: true do |t|
    t.references :order, null: false
    t.references :product, null: false
    t.integer :quantity, null: false
  end
end

class Product < ActiveRecord::Base
  has_many :line_items
end

class LineItem < ActiveRecord::Base
  belongs_to :order
  belongs_to :product
end

class Order < ActiveRecord::Base
  has_many :line_items

  # One query per line item for its product: the N+1 a trace makes plain.
  def total_cents
    line_items.sum { |li| li.product.price_cents * li.quantity }
  end
end

def place_order(customer)
  Order.transaction do
    order = Order.create!(customer: customer)
    Product.order('RANDOM()').limit(2).each do |product|
      order.line_items.create!(product: product, quantity: rand(1..3))
    end
    order
  end
end

%w[apple pear fig].each.with_index(1) do |name, i|
  Product.find_or_create_by!(name: name) { |p| p.price_cents = i * 150 }
end
rounds = Integer(ARGV.fetch(0, '1'))
n = 0
while rounds.zero? || n < rounds
  order = place_order("customer#{n += 1}")
  puts "order #{order.id}: #{order.reload.total_cents} cents"
  sleep 0.2 if rounds.zero?
end
